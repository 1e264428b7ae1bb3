/**
 * `akbe demo` (what `npm start` runs): trains AKBE for a few steps on the default world and base
 * policy and prints a before/after table of EM, TC and TP per split. No setup: it starts its own
 * nats-server when none is configured, builds the default world on first run (<home>/world:
 * `akbe world build --seed 0`) and uses the committed base policy (assets/base: `akbe pretrain`,
 * 2000 steps, on that world; docs/world.md). A base in <home>/base wins; without either, the demo
 * pretrains a shorter one there.
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CommandSpec, intFlag } from '../command.js';
import { CONNECTION_FLAGS, checkRunId } from '../common-flags.js';
import { INSPECT_FLAGS, startTrainInspector } from './train.js';

/** The committed default base (dist/src/cli/commands -> repo root, or src/cli/commands under tap). */
const COMMITTED_BASE = fileURLToPath(new URL('../../../../assets/base', import.meta.url));
const COMMITTED_BASE_SRC = fileURLToPath(new URL('../../../assets/base', import.meta.url));

/** The committed base, if it was pretrained on exactly this world's pretraining tokens. */
function committedBaseFor(worldDir: string): string | null {
  const digest = JSON.parse(readFileSync(join(worldDir, 'world.json'), 'utf8')).digests?.[
    'pretrain/tokens.u16'
  ];
  for (const dir of [COMMITTED_BASE, COMMITTED_BASE_SRC]) {
    const state = join(dir, 'pretrain.json');
    if (existsSync(state) && JSON.parse(readFileSync(state, 'utf8')).worldTokens === digest) return dir;
  }
  return null;
}

/** Pretraining steps of the demo's base when it must build one (akbe pretrain's default: 2000). */
export const DEMO_PRETRAIN_STEPS = 1200;

/** The demo's run: configs/default.yaml at a size that fits 15 minutes on 2 cores. */
export const DEMO_CONFIG = {
  algo: 'akbe',
  steps: 8,
  batchQuestions: 16,
  miniBatchQuestions: 4,
  gWithTool: 8,
  gNoTool: 4,
  maxToolCalls: 6,
  maxResponseTokens: 96,
  lambda: 0.05,
  clipEps: 0.2,
  lr: 3e-4,
  seed: 0,
  topK: 3,
  evalQuestions: 96,
  evalSplits: ['dev', 'test'],
};

const demo: CommandSpec = {
  path: ['demo'],
  summary: 'train AKBE a few steps on the default world and base policy; print EM, TC, TP before and after',
  flags: {
    run: { type: 'string', value: 'ID', description: 'run id (default: demo-<time>)' },
    steps: { type: 'string', value: 'N', description: 'training steps', default: String(DEMO_CONFIG.steps) },
    ...CONNECTION_FLAGS,
    ...INSPECT_FLAGS,
  },
  async run(ctx) {
    const started = Date.now();
    const secs = () => `${((Date.now() - started) / 1000).toFixed(0)}s`;
    const steps = intFlag(ctx, 'steps', { min: 1, max: 100 })!;
    const runId = await checkRunId(
      'run',
      (ctx.flags.run as string | undefined) ??
        `demo-${new Date()
          .toISOString()
          .replace(/[^0-9]/g, '')
          .slice(0, 14)}`,
    );
    const { akbeHome } = await import('../../actors/nats/connection.js');
    const home = (ctx.flags.home as string | undefined) ?? akbeHome();
    // The world's documented locations (docs/world.md): a base built by hand is used as is.
    const worldDir = join(home, 'world');
    let baseDir = join(home, 'base');
    const err = ctx.err as NodeJS.WritableStream & { isTTY?: boolean };

    // ---- the default world and base policy, built once --------------------------------------
    if (!existsSync(join(worldDir, 'world.json'))) {
      err.write(`demo: building the default world into ${worldDir} (first run only)\n`);
      const { DEFAULT_WORLD } = await import('../../world/config.js');
      const { generateWorld } = await import('../../world/generate.js');
      const { writeWorld } = await import('../../world/files.js');
      await writeWorld(generateWorld({ ...DEFAULT_WORLD, seed: 0 }), worldDir);
      err.write(`demo: world built (${secs()})\n`);
    }
    const committed = existsSync(join(baseDir, 'model.safetensors')) ? null : committedBaseFor(worldDir);
    if (committed) {
      baseDir = committed;
      err.write(`demo: using the committed base policy ${baseDir}\n`);
    } else if (!existsSync(join(baseDir, 'model.safetensors'))) {
      err.write(`demo: pretraining the base policy into ${baseDir} (first run only; resumable)\n`);
      const { DEFAULT_PRETRAIN } = await import('../../world/pretrain.js');
      const { runPretrain } = await import('../../jobs/pretrain-run.js');
      const t0 = Date.now();
      await runPretrain({
        worldDir,
        outDir: baseDir,
        // Shorter than `akbe pretrain`'s default so that a first `npm start` fits 15 minutes on
        // 2 cores; `akbe pretrain --world W --out B --resume --steps 2000` continues it later.
        config: { ...DEFAULT_PRETRAIN, steps: DEMO_PRETRAIN_STEPS },
        resume: existsSync(join(baseDir, 'pretrain.json')),
        checkpointEvery: 100,
        logEvery: 100,
        threads: 0,
        err,
      });
      err.write(`demo: base policy pretrained in ${((Date.now() - t0) / 1000).toFixed(0)}s\n`);
    }

    // ---- train and compare ----------------------------------------------------------------------
    const { parseJobConfig, runTrainJob } = await import('./train-job.js');
    const job = await parseJobConfig(
      JSON.stringify({ ...DEMO_CONFIG, steps, world: worldDir, policy: baseDir }),
      'demo.json',
    );
    await using insp = await startTrainInspector(ctx);
    const r = await runTrainJob({
      job,
      runId,
      resume: false,
      nats: ctx.flags.nats as string | undefined,
      home,
      concurrency: 48,
      threads: 0,
      device: 'cpu',
      inspect: insp?.inspect,
      out: ctx.out,
      err,
    });
    ctx.out.write(
      `demo: AKBE ${r.steps} steps (B ${DEMO_CONFIG.batchQuestions}, G_wt ${DEMO_CONFIG.gWithTool}, G_nt ${DEMO_CONFIG.gNoTool}) in ${r.seconds.toFixed(0)}s; total ${secs()}\n` +
        `audit it with: akbe nats up, then akbe replay --run ${runId} (or akbe events export --run ${runId} --out ${runId}.jsonl)\n`,
    );
    return 0;
  },
};

export const demoCommands: CommandSpec[] = [demo];
