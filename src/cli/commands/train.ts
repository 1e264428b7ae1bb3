/**
 * `akbe train --algo A --config FILE [--steps N] [--frozen-policy DIR|run:ID] [--run-id ID] [--resume]
 * [--inspect [--inspect-port P]] [--engine URL]`: trains a policy on a world with GRPO (+ AKBE), every effect over
 * NATS (see src/actors/orchestrator/orchestrator.ts); `--inspect` shows every machine live in the Stately
 * inspector (docs/inspector.md); `--engine` decodes the rollouts on an external inference engine
 * (docs/models.md).
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */

import { listAlgorithms } from '../../rl/algorithms/index.js';
import { type CommandContext, type CommandSpec, choiceFlag, intFlag, UsageError } from '../command.js';
import { CONNECTION_FLAGS, checkRunId, ENGINE_FLAGS, engineOptions } from '../common-flags.js';

/** Every registered algorithm (src/rl/algorithms). */
const ALGOS = listAlgorithms();
const DEVICES = ['cpu', 'webgpu', 'cuda', 'auto'] as const;

export const SHARED_FLAGS = {
  ...CONNECTION_FLAGS,
  concurrency: {
    type: 'string',
    value: 'N',
    description: 'rollouts run at once in this process',
    default: '32',
  },
  threads: {
    type: 'string',
    value: 'N',
    description: 'ORT intra-op threads of the policy (0 = one per core)',
    default: '1',
  },
  device: { type: 'string', value: 'D', description: DEVICES.join(' | '), default: 'cpu' },
} as const;

/** `--inspect [--inspect-port P]`, shared by `akbe train` and `akbe demo`. */
export const INSPECT_FLAGS = {
  inspect: {
    type: 'boolean',
    description: 'show every machine of the run live in the Stately inspector (docs/inspector.md)',
  },
  'inspect-port': {
    type: 'string',
    value: 'P',
    description: 'inspector relay port (0 = any free port)',
    default: '8080',
  },
} as const;

/**
 * Starts the inspector relay when `--inspect` is given (null otherwise) and prints its URL on
 * stderr. The caller holds it with `await using`, so the relay is closed when training ends or
 * fails. No browser is opened when CI is set.
 */
export async function startTrainInspector(ctx: CommandContext) {
  const port = intFlag(ctx, 'inspect-port', { min: 0, max: 65535 })!;
  if (ctx.flags.inspect !== true) {
    if (ctx.flags['inspect-port'] !== '8080') throw new UsageError('--inspect-port needs --inspect');
    return null;
  }
  const { startInspector } = await import('../../actors/inspect/inspect.js');
  const insp = await startInspector({ port, open: !process.env.CI });
  ctx.err.write(
    `inspector: open ${insp.url} (the Stately inspector, fed by the relay at ${insp.wsUrl}; docs/inspector.md)\n`,
  );
  return insp;
}

const train: CommandSpec = {
  path: ['train'],
  summary:
    'Train a policy with GRPO or GRPO+AKBE on a world (progress, a line per step, dev eval before/after)',
  flags: {
    algo: {
      type: 'string',
      value: 'A',
      description: `${ALGOS.join(' | ')} (overrides the config file; a plugin's algorithm: name it in the config)`,
    },
    config: { type: 'string', value: 'FILE', description: 'YAML or JSON config (see configs/default.yaml)' },
    steps: { type: 'string', value: 'N', description: 'training steps (overrides the config file)' },
    'frozen-policy': {
      type: 'string',
      value: 'DIR',
      description: "offline-akbe's frozen checkpoint: a directory or run:<run id> (config frozenPolicy)",
    },
    plugin: {
      type: 'string',
      value: 'FILES',
      description:
        "modules that register algorithms or tools, comma-separated (after the config's plugins; docs/api.md)",
    },
    'run-id': { type: 'string', value: 'ID', description: 'run id (default: train-<time>)' },
    resume: { type: 'boolean', description: 'continue --run-id from its log and checkpoints' },
    'no-workers': {
      type: 'boolean',
      description: 'run no roles here: rollouts and services come from akbe worker processes',
    },
    ...ENGINE_FLAGS,
    ...INSPECT_FLAGS,
    ...SHARED_FLAGS,
  },
  async run(ctx) {
    const engine = await engineOptions(ctx);
    const noWorkers = ctx.flags['no-workers'] === true;
    if (engine && noWorkers)
      throw new UsageError(
        '--engine answers svc.generate from the policy role of this process, and --no-workers runs none: give --engine to `akbe worker --role policy`',
      );
    const resume = ctx.flags.resume === true;
    const runIdFlag = ctx.flags['run-id'] as string | undefined;
    if (resume && !runIdFlag) throw new UsageError('--resume needs --run-id ID (the run to continue)');
    if (!resume && typeof ctx.flags.config !== 'string')
      throw new UsageError('--config FILE is required (see configs/default.yaml)');
    const runId = await checkRunId(
      'run-id',
      runIdFlag ??
        `train-${new Date()
          .toISOString()
          .replace(/[^0-9]/g, '')
          .slice(0, 14)}`,
    );
    const algo = choiceFlag(ctx, 'algo', ALGOS);
    const steps = intFlag(ctx, 'steps', { min: 1 });
    const frozenPolicy = ctx.flags['frozen-policy'] as string | undefined;
    const over = {
      ...(algo ? { algo } : {}),
      ...(steps ? { steps } : {}),
      ...(frozenPolicy ? { frozenPolicy } : {}),
    };
    const plugins = typeof ctx.flags.plugin === 'string' ? ctx.flags.plugin.split(',').filter(Boolean) : [];
    if (resume && plugins.length)
      throw new UsageError(
        '--plugin with --resume: a resumed run loads the plugins its run.started recorded',
      );
    const { readJobConfig, parseJobConfig, runTrainJob } = await import('./train-job.js');
    const job =
      typeof ctx.flags.config === 'string'
        ? await readJobConfig(ctx.flags.config, over, plugins)
        : await parseJobConfig('{}', 'config', over, plugins);
    const concurrency = intFlag(ctx, 'concurrency', { min: 1 })!;
    const threads = intFlag(ctx, 'threads', { min: 0 })!;
    const device = choiceFlag(ctx, 'device', DEVICES, 'cpu')!;
    await using insp = await startTrainInspector(ctx);
    await runTrainJob({
      job,
      runId,
      resume,
      nats: ctx.flags.nats as string | undefined,
      home: ctx.flags.home as string | undefined,
      concurrency,
      threads,
      device,
      inspect: insp?.inspect,
      roles: noWorkers ? [] : undefined,
      engine,
      out: ctx.out,
      err: ctx.err as NodeJS.WritableStream & { isTTY?: boolean },
    });
    return 0;
  },
};

export const trainCommands: CommandSpec[] = [train];
