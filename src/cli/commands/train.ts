/**
 * `akbe train --algo grpo|akbe --config FILE [--steps N] [--run-id ID] [--resume]`: trains a
 * policy on a world with GRPO (+ AKBE), every effect over NATS (see src/actors/orchestrator.ts).
 */
import { type CommandSpec, choiceFlag, intFlag, UsageError } from '../command.js';

const ALGOS = ['grpo', 'akbe'] as const;
const DEVICES = ['cpu', 'webgpu', 'cuda', 'auto'] as const;

export const SHARED_FLAGS = {
  nats: {
    type: 'string',
    value: 'URL',
    description: 'NATS server (default: NATS_URL, then akbe nats up, then an embedded server)',
  },
  home: { type: 'string', value: 'DIR', description: 'project data dir (default: AKBE_HOME or ./.akbe)' },
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

const train: CommandSpec = {
  path: ['train'],
  summary:
    'Train a policy with GRPO or GRPO+AKBE on a world (progress, a line per step, dev eval before/after)',
  flags: {
    algo: { type: 'string', value: 'A', description: 'grpo | akbe (overrides the config file)' },
    config: { type: 'string', value: 'FILE', description: 'YAML or JSON config (see configs/default.yaml)' },
    steps: { type: 'string', value: 'N', description: 'training steps (overrides the config file)' },
    'run-id': { type: 'string', value: 'ID', description: 'run id (default: train-<time>)' },
    resume: { type: 'boolean', description: 'continue --run-id from its log and checkpoints' },
    'no-workers': {
      type: 'boolean',
      description: 'run no roles here: rollouts and services come from akbe worker processes',
    },
    ...SHARED_FLAGS,
  },
  async run(ctx) {
    const resume = ctx.flags.resume === true;
    const runIdFlag = ctx.flags['run-id'] as string | undefined;
    if (resume && !runIdFlag) throw new UsageError('--resume needs --run-id ID (the run to continue)');
    if (!resume && typeof ctx.flags.config !== 'string')
      throw new UsageError('--config FILE is required (see configs/default.yaml)');
    const { RUN_ID_PATTERN } = await import('../../events/catalog.js');
    const runId =
      runIdFlag ??
      `train-${new Date()
        .toISOString()
        .replace(/[^0-9]/g, '')
        .slice(0, 14)}`;
    if (!RUN_ID_PATTERN.test(runId))
      throw new UsageError(`--run-id must be 1-64 characters from [A-Za-z0-9_-], got '${runId}'`);
    const algo = choiceFlag(ctx, 'algo', ALGOS);
    const steps = intFlag(ctx, 'steps', { min: 1 });
    const over = { ...(algo ? { algo } : {}), ...(steps ? { steps } : {}) };
    const { readJobConfig, parseJobConfig, runTrainJob } = await import('./train-job.js');
    const job =
      typeof ctx.flags.config === 'string'
        ? await readJobConfig(ctx.flags.config, over)
        : await parseJobConfig('{}', 'config', over);
    await runTrainJob({
      job,
      runId,
      resume,
      nats: ctx.flags.nats as string | undefined,
      home: ctx.flags.home as string | undefined,
      concurrency: intFlag(ctx, 'concurrency', { min: 1 })!,
      threads: intFlag(ctx, 'threads', { min: 0 })!,
      device: choiceFlag(ctx, 'device', DEVICES, 'cpu')!,
      roles: ctx.flags['no-workers'] === true ? [] : undefined,
      out: ctx.out,
      err: ctx.err as NodeJS.WritableStream & { isTTY?: boolean },
    });
    return 0;
  },
};

export const trainCommands: CommandSpec[] = [train];
