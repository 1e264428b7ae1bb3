/**
 * `akbe experiment run --spec FILE [--algos A,B] [--dry-run]`: runs a grid of training runs
 * (algorithms x options x seeds, src/experiments/spec.ts) as ordinary event-sourced runs, skipping
 * finished ones and resuming killed ones, with one progress bar for the grid.
 *
 * `akbe experiment report --spec FILE [--out DIR]`: folds the runs' logs into tables (mean and 95%
 * t-interval over seeds, paired differences against the baseline), per-step SVG plots and
 * report.json (also written to <home>/experiments/<name>/, where `akbe dashboard` reads it).
 * docs/experiments.md.
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { AkbeEvent } from '../../events/catalog.js';
import type { ExperimentSpec, PlannedRun } from '../../experiments/spec.js';
import {
  type CommandContext,
  type CommandSpec,
  choiceFlag,
  intFlag,
  requireString,
  UsageError,
} from '../command.js';
import { CONNECTION_FLAGS } from '../common-flags.js';
import { SHARED_FLAGS } from './train.js';

async function readSpec(file: string): Promise<ExperimentSpec> {
  const { parseSpec, SpecError } = await import('../../experiments/spec.js');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new SpecError(
      file,
      '',
      `cannot read it (${(err as NodeJS.ErrnoException).code}); see experiments/tiny.yaml`,
      {
        cause: err,
      },
    );
  }
  return parseSpec(text, file);
}

/**
 * The runs to do: every planned run, or those of the `--algos` algorithms. A cell whose algorithm
 * is not registered is refused naming what is (a spec may name algorithms still to come).
 */
async function selectRuns(ctx: CommandContext, spec: ExperimentSpec): Promise<PlannedRun[]> {
  const { planRuns, SpecError } = await import('../../experiments/spec.js');
  const { listAlgorithms } = await import('../../rl/algorithms/index.js');
  const registered = listAlgorithms();
  const named = [...new Set(spec.cells.map((c) => c.algo))];
  let wanted = named;
  if (typeof ctx.flags.algos === 'string') {
    wanted = ctx.flags.algos.split(',').map((s) => s.trim());
    const stray = wanted.filter((a) => !named.includes(a));
    if (stray.length)
      throw new UsageError(
        `--algos names ${stray.join(', ')}, which ${spec.file} does not; it has ${named.join(', ')}`,
      );
  }
  const missing = wanted.filter((a) => !registered.includes(a));
  if (missing.length) {
    const cell = spec.cells.find((c) => c.algo === missing[0])!;
    const runnable = wanted.filter((a) => registered.includes(a));
    throw new SpecError(
      spec.file,
      `grid[${cell.entry}].algo`,
      `${missing.map((a) => `'${a}'`).join(', ')} ${missing.length > 1 ? 'are not registered algorithms' : 'is not a registered algorithm'} (registered: ${registered.join(', ')})${runnable.length ? `; run the others with --algos ${runnable.join(',')}` : ''}`,
    );
  }
  return planRuns(spec).filter((r) => wanted.includes(r.cell.algo));
}

const DEVICES = ['cpu', 'webgpu', 'cuda', 'auto'] as const;

const run: CommandSpec = {
  path: ['experiment', 'run'],
  summary:
    'run an experiment grid (algorithms x options x seeds); finished runs are skipped, killed ones resumed',
  flags: {
    spec: {
      type: 'string',
      value: 'FILE',
      description: 'experiment spec, YAML or JSON (see experiments/tiny.yaml)',
    },
    algos: {
      type: 'string',
      value: 'A,B',
      description: "only the cells of these algorithms (default: all of the spec's)",
    },
    'dry-run': { type: 'boolean', description: 'list the runs and where each stands; train nothing' },
    ...SHARED_FLAGS,
  },
  async run(ctx) {
    const spec = await readSpec(requireString(ctx, 'spec'));
    const runs = await selectRuns(ctx, spec);
    const concurrency = intFlag(ctx, 'concurrency', { min: 1 })!;
    const threads = intFlag(ctx, 'threads', { min: 0 })!;
    const device = choiceFlag(ctx, 'device', DEVICES, 'cpu')!;
    const { jobConfigOf, runGrid, runStateOf } = await import('./experiment-run.js');
    for (const r of runs) await jobConfigOf(spec, r); // every cell's config is valid before any run starts
    const { connectAkbeNats, akbeHome } = await import('../../actors/nats/connection.js');
    const { EventStore } = await import('../../events/store.js');
    const home = (ctx.flags.home as string | undefined) ?? akbeHome();
    // A run: one embedded server for the grid, or a server that stays (never another's embedded one).
    await using nats = await connectAkbeNats({
      url: ctx.flags.nats as string | undefined,
      home,
      embedded: true,
    });
    const store = await EventStore.open(nats.nc);
    if (ctx.flags['dry-run'] === true) {
      for (const r of runs) {
        const s = await runStateOf(store, r.runId);
        ctx.out.write(
          `${r.runId}\t${r.cell.label}\tseed ${r.seed}\t${s.status}${s.status === 'unfinished' ? ` (${s.stepsDone} steps published)` : ''}\n`,
        );
      }
      return 0;
    }
    ctx.err.write(`experiment ${spec.name}: ${runs.length} runs, NATS at ${nats.url} (${nats.source})\n`);
    const failed = await runGrid({
      spec,
      runs,
      store,
      natsUrl: nats.url,
      home,
      concurrency,
      threads,
      device,
      err: ctx.err as NodeJS.WritableStream & { isTTY?: boolean },
    });
    ctx.err.write(
      `experiment ${spec.name}: ${runs.length - failed} of ${runs.length} runs completed; report with akbe experiment report --spec ${spec.file}\n`,
    );
    return failed ? 1 : 0;
  },
};

const report: CommandSpec = {
  path: ['experiment', 'report'],
  summary:
    "fold an experiment's run logs into tables (mean ± 95% t-interval), paired differences and SVG plots",
  flags: {
    spec: { type: 'string', value: 'FILE', description: 'experiment spec, YAML or JSON' },
    out: {
      type: 'string',
      value: 'DIR',
      description: 'where to write README.md, report.json and the plots (default: <home>/experiments/<name>)',
    },
    ...CONNECTION_FLAGS,
  },
  async run(ctx) {
    const spec = await readSpec(requireString(ctx, 'spec'));
    const { planRuns } = await import('../../experiments/spec.js');
    const planned = planRuns(spec);
    const { connectAkbeNats, akbeHome } = await import('../../actors/nats/connection.js');
    const { EventStore } = await import('../../events/store.js');
    const { fold } = await import('../../events/projection.js');
    const { runFigures, RUN_FIGURE_TYPES } = await import('../../events/projections/run-figures.js');
    const { buildReport } = await import('../../experiments/report.js');
    const { reportFiles } = await import('../../experiments/render.js');
    const home = (ctx.flags.home as string | undefined) ?? akbeHome();
    const figures = new Map();
    {
      await using nats = await connectAkbeNats({ url: ctx.flags.nats as string | undefined, home });
      const store = await EventStore.open(nats.nc);
      for (const r of planned) {
        // Only the four types the report uses, each read from its own subject, then in log order.
        const stored = [];
        for (const type of RUN_FIGURE_TYPES)
          for await (const s of store.replayType(r.runId, type)) stored.push(s);
        stored.sort((a, b) => a.seq - b.seq);
        figures.set(
          r.runId,
          fold(
            runFigures,
            stored.map((s) => s.event as AkbeEvent),
          ),
        );
      }
    }
    const rep = buildReport(spec, planned, figures);
    const files = reportFiles(rep);
    const homeDir = resolve(home, 'experiments', spec.name);
    const out = resolve((ctx.flags.out as string | undefined) ?? homeDir);
    await mkdir(out, { recursive: true });
    for (const [name, text] of files) await writeFile(join(out, name), text);
    if (out !== homeDir) {
      await mkdir(homeDir, { recursive: true });
      await writeFile(join(homeDir, 'report.json'), files.get('report.json')!);
    }
    const done = rep.runs.filter((r) => r.status === 'completed').length;
    ctx.err.write(`experiment ${spec.name}: ${done} of ${rep.runs.length} runs completed\n`);
    ctx.out.write(`${files.get('README.md')}\n`);
    ctx.err.write(
      `report: ${join(out, 'README.md')}, ${files.size - 2} plots; report.json also in ${homeDir}\n`,
    );
    return 0;
  },
};

export const experimentCommands: CommandSpec[] = [run, report];
