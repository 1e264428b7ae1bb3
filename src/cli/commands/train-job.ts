/**
 * The training job behind `akbe train` and `akbe demo`: reads a config file, connects to NATS
 * (NATS_URL, a running `akbe nats up`, or an embedded nats-server), evaluates on dev before and
 * after, runs or resumes the run with the orchestrator (src/actors), and prints progress bars and
 * one line per step.
 *
 * Config file (YAML or JSON): every key of src/rl/config.ts's TrainConfig, plus the run's
 * inputs: `world` (world dir), `policy` (base checkpoint dir), `topK`, `evalQuestions`,
 * `evalSplits`. An unknown key or a bad value is a ConfigFileError naming the file and the key.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { SplitScore } from '../../actors/evaluate.js';
import type { RunSpec } from '../../actors/roles.js';
import type { TrainConfig } from '../../rl/config.js';
import { Progress } from '../../util/progress.js';

export class ConfigFileError extends Error {
  constructor(
    readonly file: string,
    readonly key: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`${file}: ${message}`, opts);
    this.name = 'ConfigFileError';
  }
}

export interface JobConfig {
  train: TrainConfig;
  world?: string;
  policy?: string;
  topK: number;
  evalQuestions: number;
  evalSplits: Array<'train' | 'dev' | 'test'>;
}

const RUN_KEYS = ['world', 'policy', 'topK', 'evalQuestions', 'evalSplits'] as const;

/** Parses and validates a config file's text; `file` names it in errors. */
export async function parseJobConfig(
  text: string,
  file: string,
  over: Partial<TrainConfig> = {},
): Promise<JobConfig> {
  const YAML = await import('yaml');
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new ConfigFileError(
      file,
      '',
      `not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
      { cause: err },
    );
  }
  raw ??= {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new ConfigFileError(file, '', 'must be a mapping of settings');
  const rest: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
  const run: Record<string, unknown> = {};
  for (const k of RUN_KEYS) {
    if (k in rest) run[k] = rest[k];
    delete rest[k];
  }
  const { validateTrainConfig } = await import('../../rl/config.js');
  let train: TrainConfig;
  try {
    train = validateTrainConfig({ ...rest, ...over });
  } catch (err) {
    throw new ConfigFileError(file, (err as { key?: string }).key ?? '', (err as Error).message, {
      cause: err,
    });
  }
  const str = (k: string) => {
    if (run[k] === undefined) return undefined;
    if (typeof run[k] !== 'string' || run[k] === '')
      throw new ConfigFileError(
        file,
        k,
        `config.${k} must be a directory path, got ${JSON.stringify(run[k])}`,
      );
    return resolve(run[k] as string);
  };
  const int = (k: string, min: number, fallback: number) => {
    const v = run[k] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
      throw new ConfigFileError(
        file,
        k,
        `config.${k} must be an integer >= ${min}, got ${JSON.stringify(v)}`,
      );
    return v;
  };
  const splits = (run.evalSplits ?? ['dev']) as unknown;
  if (!Array.isArray(splits) || !splits.every((s) => s === 'train' || s === 'dev' || s === 'test'))
    throw new ConfigFileError(
      file,
      'evalSplits',
      `config.evalSplits must be a list of train|dev|test, got ${JSON.stringify(splits)}`,
    );
  return {
    train,
    world: str('world'),
    policy: str('policy'),
    topK: int('topK', 1, 3),
    evalQuestions: int('evalQuestions', 0, 32),
    evalSplits: splits as JobConfig['evalSplits'],
  };
}

export async function readJobConfig(file: string, over: Partial<TrainConfig> = {}): Promise<JobConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigFileError(
      file,
      '',
      `cannot read it (${(err as NodeJS.ErrnoException).code}); pass --config FILE (see configs/default.yaml)`,
      { cause: err },
    );
  }
  return parseJobConfig(text, file, over);
}

export interface TrainJobOptions {
  job: JobConfig;
  runId: string;
  resume: boolean;
  nats?: string;
  home?: string;
  concurrency: number;
  threads: number;
  device: 'cpu' | 'webgpu' | 'cuda' | 'auto';
  /** xstate inspection of every machine of the run (run, questions, rollouts, learner). */
  inspect?: (event: import('xstate').InspectionEvent) => void;
  /** Roles this process runs (default all). */
  roles?: Array<'rollout' | 'policy' | 'search' | 'trainer'>;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream & { isTTY?: boolean };
}

export interface TrainJobResult {
  steps: number;
  policyVersion: number;
  seconds: number;
  before: SplitScore[];
  after: SplitScore[];
}

export async function runTrainJob(o: TrainJobOptions): Promise<TrainJobResult> {
  const { connectAkbeNats, akbeHome } = await import('../../actors/connection.js');
  const { jetstream } = await import('@nats-io/jetstream');
  const { EventStore } = await import('../../events/store.js');
  const { runTraining, formatStepLine } = await import('../../actors/orchestrator.js');
  const { readRunSpec } = await import('../../actors/roles.js');
  const { evaluateSplit, formatBeforeAfter } = await import('../../actors/evaluate.js');
  const home = o.home ?? akbeHome();
  await using nats = await connectAkbeNats({ url: o.nats, home });
  o.err.write(`train: NATS at ${nats.url} (${nats.source}), run ${o.runId}\n`);
  const store = await EventStore.open(nats.nc);
  const js = jetstream(nats.nc);
  let spec: RunSpec;
  if (o.resume) spec = await readRunSpec(store, o.runId);
  else {
    if (!o.job.world || !o.job.policy)
      throw new ConfigFileError(
        'config',
        !o.job.world ? 'world' : 'policy',
        'config.world and config.policy (world dir and base checkpoint) are required',
      );
    spec = { train: o.job.train, worldDir: o.job.world, basePolicy: o.job.policy, topK: o.job.topK };
  }
  const context = async (dir: string) =>
    (JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as { n_positions: number }).n_positions;
  const n = await context(spec.basePolicy);
  const evaluate = async (
    nc: import('@nats-io/transport-node').NatsConnection,
    runId: string,
    version: number,
    when: string,
  ) => {
    const scores: SplitScore[] = [];
    if (o.job.evalQuestions === 0) return scores;
    for (const split of o.job.evalSplits) {
      const t0 = Date.now();
      const { score } = await evaluateSplit({
        nc,
        runId,
        version,
        worldDir: spec.worldDir,
        split,
        limit: o.job.evalQuestions,
        topK: spec.topK,
        context: n,
      });
      o.err.write(
        `eval ${when} (v${version}) ${split}: EM ${score.em.toFixed(3)} TC ${score.tc.toFixed(2)} TP ${score.tp === null ? '-' : score.tp.toFixed(3)} no-tool EM ${score.noToolEm.toFixed(3)} (${score.questions} questions, ${((Date.now() - t0) / 1000).toFixed(0)}s)\n`,
      );
      scores.push(score);
    }
    return scores;
  };
  let before: SplitScore[] = [];
  let after: SplitScore[] = [];
  let bar: Progress | null = null;
  let barStep = -1;
  let trainBar: Progress | null = null;
  const t0 = Date.now();
  const result = await runTraining({
    nc: nats.nc,
    js,
    store,
    runId: o.runId,
    spec,
    runDir: join(home, 'runs', o.runId),
    roles: o.roles,
    inspect: o.inspect,
    resume: o.resume,
    concurrency: o.concurrency,
    threads: o.threads,
    device: o.device,
    log: (line) => o.err.write(`train: ${line}\n`),
    beforeRun: async (c) => {
      before = await evaluate(c.nc, c.runId, c.version, 'before');
    },
    afterRun: async (c) => {
      after = await evaluate(c.nc, c.runId, c.version, 'after');
    },
    onRollout: (step, done, total) => {
      if (step !== barStep) {
        bar?.finish();
        bar = new Progress(`step ${step} rollouts`, {
          total,
          stream: o.err,
          intervalMs: o.err.isTTY ? 100 : 10_000,
        });
        barStep = step;
      }
      bar?.tick();
      if (done === total) bar?.finish();
    },
    onTrainProgress: (step, done, total) => {
      if (done === 1)
        trainBar = new Progress(`step ${step} training`, {
          total,
          stream: o.err,
          intervalMs: o.err.isTTY ? 100 : 10_000,
        });
      trainBar?.tick();
      if (done === total) trainBar?.finish();
    },
    onStep: (r) => o.out.write(`${formatStepLine(r)}\n`),
  });
  o.err.write(
    `train: run ${o.runId} ${result.steps} steps, policy v${result.policyVersion}, checkpoints in ${join(home, 'runs', o.runId, 'checkpoints')}\n`,
  );
  if (before.length && after.length) o.out.write(formatBeforeAfter(before, after));
  return {
    steps: result.steps,
    policyVersion: result.policyVersion,
    seconds: (Date.now() - t0) / 1000,
    before,
    after,
  };
}
