/**
 * The training job behind `akbe train` and `akbe demo`: reads a config file, connects to NATS
 * (NATS_URL, a running `akbe nats up`, or an embedded nats-server), evaluates on dev before and
 * after, runs or resumes the run with the orchestrator (src/actors), and prints progress bars and
 * one line per step.
 *
 * Config file (YAML or JSON): every key of src/rl/config.ts's TrainConfig, plus the run's
 * inputs: `world` (world dir), `policy` (base checkpoint dir), `topK`, `tools` (registered tool
 * names, default [search]), `index` (an `akbe index build` dir, default the world's), `evalQuestions`,
 * `evalSplits`, `keepCheckpoints`, `plugins` (modules that register algorithms or tools, loaded before
 * the rest is validated; docs/api.md). An unknown key or a bad value is a ConfigFileError naming the file and the key.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { InspectionEvent } from 'xstate';
import YAML from 'yaml';
import {
  DEFAULT_KEEP_CHECKPOINTS,
  keepCheckpointsProblem,
} from '../../actors/checkpoints/keep-checkpoints.js';
import { type AkbeNats, akbeHome, connectAkbeNats, NatsLostError } from '../../actors/nats/connection.js';
import { formatStepLine, runTraining } from '../../actors/orchestrator/orchestrator.js';
import {
  type EngineOptions,
  type EvalSettings,
  type RunSpec,
  readRunSpec,
  runEnvironment,
} from '../../actors/roles/roles.js';
import { evaluateSplit, formatBeforeAfter, type SplitScore } from '../../actors/rollout/evaluate.js';
import { createEvent } from '../../events/catalog.js';
import { EventStore } from '../../events/store.js';
import { checkpointLimits } from '../../gpu/checkpoint.js';
import { loadPlugins, type PluginRef } from '../../plugins/plugins.js';
import { type TrainConfig, validateTrainConfig } from '../../rl/config.js';
import { DEFAULT_TOOLS, toolsNamed } from '../../tools/registry.js';
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
  /** Tools by registered name (default: search). */
  tools?: string[];
  /** A search index built with `akbe index build` (default: the world's, `<world>/index`). */
  index?: string;
  evalQuestions: number;
  evalSplits: EvalSettings['splits'];
  /** Policy versions kept on disk and in the object store (0 = all). */
  keepCheckpoints: number;
  /** Plugins loaded before the config was validated (config `plugins`, then `--plugin`). */
  plugins: PluginRef[];
}

const RUN_KEYS = [
  'world',
  'policy',
  'topK',
  'tools',
  'index',
  'evalQuestions',
  'evalSplits',
  'keepCheckpoints',
  'plugins',
] as const;

/** Parses and validates a config file's text; `file` names it in errors. */
export async function parseJobConfig(
  text: string,
  file: string,
  over: Partial<TrainConfig> = {},
  extraPlugins: readonly string[] = [],
): Promise<JobConfig> {
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
  // Before the validation: a plugin may register the algorithm or tool the config names.
  const plugins = await configPlugins(run.plugins, file, extraPlugins);
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
  const keepCheckpoints = run.keepCheckpoints ?? DEFAULT_KEEP_CHECKPOINTS;
  const keepProblem = keepCheckpointsProblem(keepCheckpoints, train.maxStaleness);
  if (keepProblem) throw new ConfigFileError(file, 'keepCheckpoints', keepProblem);
  let tools: string[] | undefined;
  if (run.tools !== undefined) {
    if (!Array.isArray(run.tools) || !run.tools.every((x) => typeof x === 'string'))
      throw new ConfigFileError(
        file,
        'tools',
        `config.tools must be a list of tool names, got ${JSON.stringify(run.tools)}`,
      );
    try {
      tools = toolsNamed(run.tools as string[]).map((t) => t.name);
    } catch (err) {
      throw new ConfigFileError(file, 'tools', `config.tools: ${(err as Error).message}`, { cause: err });
    }
  }
  return {
    train,
    world: str('world'),
    policy: str('policy'),
    topK: int('topK', 1, 3),
    tools,
    index: str('index'),
    evalQuestions: int('evalQuestions', 0, 32),
    evalSplits: splits as JobConfig['evalSplits'],
    keepCheckpoints: keepCheckpoints as number,
    plugins,
  };
}

/** Loads a config's `plugins` (paths relative to the config file) and then `--plugin`'s (to the cwd). */
async function configPlugins(listed: unknown, file: string, extra: readonly string[]): Promise<PluginRef[]> {
  if (
    listed !== undefined &&
    (!Array.isArray(listed) || !listed.every((x) => typeof x === 'string' && x !== ''))
  )
    throw new ConfigFileError(
      file,
      'plugins',
      `config.plugins must be a list of module paths, got ${JSON.stringify(listed)}`,
    );
  try {
    return [
      ...(await loadPlugins((listed as string[] | undefined) ?? [], dirname(resolve(file)))),
      ...(await loadPlugins(extra, process.cwd())),
    ];
  } catch (err) {
    throw new ConfigFileError(file, 'plugins', (err as Error).message, { cause: err });
  }
}

export async function readJobConfig(
  file: string,
  over: Partial<TrainConfig> = {},
  extraPlugins: readonly string[] = [],
): Promise<JobConfig> {
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
  return parseJobConfig(text, file, over, extraPlugins);
}

/**
 * The dev evaluation of a run: the one its run.started recorded (a resumed run evaluates as it was
 * started, whatever the config of the resuming command says), else the job's (a log from before
 * the settings were recorded; said in a line).
 */
export function runEvalSettings(spec: RunSpec, job: JobConfig, log: (line: string) => void): EvalSettings {
  if (spec.eval) return spec.eval;
  const settings = { questions: job.evalQuestions, splits: job.evalSplits };
  log(
    `the run's run.started records no eval settings (an older log): evaluating ${settings.questions} questions of ${settings.splits.join(', ')} as the config says`,
  );
  return settings;
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
  inspect?: (event: InspectionEvent) => void;
  /** Roles this process runs (default all). */
  roles?: Array<'rollout' | 'policy' | 'search' | 'trainer'>;
  /** The policy role answers svc.generate from this external engine (`--engine`). */
  engine?: EngineOptions;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream & { isTTY?: boolean };
  /** No per-step bars and no step lines (`akbe experiment run` draws one bar for its grid). */
  quiet?: boolean;
  /** Called after each learner step. */
  onStep?: (step: number) => void;
}

export interface TrainJobResult {
  steps: number;
  policyVersion: number;
  seconds: number;
  before: SplitScore[];
  after: SplitScore[];
}

export async function runTrainJob(o: TrainJobOptions): Promise<TrainJobResult> {
  const home = o.home ?? akbeHome();
  // A run: it may start this home's embedded server (connection.ts).
  await using nats = await connectAkbeNats({ url: o.nats, home, embedded: true });
  o.err.write(`train: NATS at ${nats.url} (${nats.source}), run ${o.runId}\n`);
  const store = await EventStore.open(nats.nc);
  let spec: RunSpec;
  if (o.resume) spec = await readRunSpec(store, o.runId);
  else {
    if (!o.job.world || !o.job.policy)
      throw new ConfigFileError(
        'config',
        !o.job.world ? 'world' : 'policy',
        'config.world and config.policy (world dir and base checkpoint) are required',
      );
    spec = {
      train: o.job.train,
      worldDir: o.job.world,
      basePolicy: o.job.policy,
      topK: o.job.topK,
      tools: o.job.tools,
      index: o.job.index,
      eval: { questions: o.job.evalQuestions, splits: o.job.evalSplits },
      keepCheckpoints: o.job.keepCheckpoints,
      plugins: o.job.plugins,
    };
  }
  const evalSettings = runEvalSettings(spec, o.job, (line) => o.err.write(`train: ${line}\n`));
  const n = (await checkpointLimits(spec.basePolicy)).context;
  // The evaluation rolls out like the run's workers: its environment (the world's or, for a
  // Hugging Face policy, Search-R1's in the model's chat template), tools and limits.
  const evalTools = toolsNamed(spec.tools ?? DEFAULT_TOOLS, { topK: spec.topK });
  const evalLimits = {
    toolTags: evalTools.map((x) => x.tag),
    maxToolCalls: spec.train.maxToolCalls,
    maxResponseTokens: spec.train.maxResponseTokens,
  };
  const evaluate = async (nc: AkbeNats['nc'], runId: string, version: number, when: 'before' | 'after') => {
    const scores: SplitScore[] = [];
    if (evalSettings.questions === 0) return scores;
    const env = await runEnvironment(spec);
    for (const split of evalSettings.splits) {
      const t0 = Date.now();
      const { score, report } = await evaluateSplit({
        nc,
        runId,
        version,
        worldDir: spec.worldDir,
        split,
        limit: evalSettings.questions,
        topK: spec.topK,
        context: n,
        env,
        tools: evalTools,
        limits: evalLimits,
      });
      o.err.write(
        `eval ${when} (v${version}) ${split}: EM ${score.em.toFixed(3)} TC ${score.tc.toFixed(2)} TP ${score.tp === null ? '-' : score.tp.toFixed(3)} no-tool EM ${score.noToolEm.toFixed(3)} (${score.questions} questions, ${((Date.now() - t0) / 1000).toFixed(0)}s)\n`,
      );
      scores.push(score);
      // On the log, so that `akbe experiment report` folds final figures without re-evaluating.
      const oracle = report.boundary.all;
      await store.append(
        createEvent(
          'eval.completed',
          {
            when,
            version,
            split,
            questions: score.questions,
            em: score.em,
            tc: score.tc,
            tp: score.tp,
            noToolEm: score.noToolEm,
            knownSearchRate: oracle.searchRateKnown,
            unknownNoSearchRate: oracle.noSearchRateUnknown,
          },
          { runId, step: Math.max(0, version - 1), policyVersion: version },
        ),
      );
    }
    return scores;
  };
  let before: SplitScore[] = [];
  let after: SplitScore[] = [];
  const bars = new Map<number, Progress>();
  let trainBar: Progress | null = null;
  let lostReported = false;
  const t0 = Date.now();
  const training = runTraining({
    nc: nats.nc,
    js: nats.js,
    store,
    runId: o.runId,
    spec,
    runDir: join(home, 'runs', o.runId),
    roles: o.roles,
    engine: o.engine,
    inspect: o.inspect,
    resume: o.resume,
    concurrency: o.concurrency,
    threads: o.threads,
    device: o.device,
    // The orchestrator's key signs every train request (issue 23 item 2).
    ...(nats.credentials ? { signingSeed: nats.credentials.seed } : {}),
    // Once the lost connection is reported, that line stays the last: the run unwinding after it
    // (its lock, its services) has nothing to add.
    log: (line) => {
      if (!lostReported) o.err.write(`train: ${line}\n`);
    },
    beforeRun: async (c) => {
      // A resumed run was evaluated before its first step when it started: read those figures
      // back instead of evaluating the resume version as if it were the base.
      const recorded = o.resume ? await recordedBeforeEval(store, c.runId) : [];
      if (recorded.length > 0) before = recorded;
      else if (c.version === 0) before = await evaluate(c.nc, c.runId, c.version, 'before');
      else if (evalSettings.questions > 0)
        o.err.write(
          `eval before: not on the log of ${c.runId} (interrupted first); skipped at v${c.version}\n`,
        );
    },
    afterRun: async (c) => {
      after = await evaluate(c.nc, c.runId, c.version, 'after');
    },
    onRollout: (step, done, total) => {
      if (o.quiet) return;
      // One bar per step: with maxStaleness >= 1 the rollouts of two steps arrive interleaved.
      let bar = bars.get(step);
      if (!bar) {
        bar = new Progress(`step ${step} rollouts`, {
          total,
          stream: o.err,
          intervalMs: o.err.isTTY ? 100 : 10_000,
        });
        bars.set(step, bar);
      }
      bar.tick();
      if (done === total) {
        bar.finish();
        bars.delete(step);
      }
    },
    onTrainProgress: (step, done, total) => {
      if (o.quiet) return;
      if (done === 1)
        trainBar = new Progress(`step ${step} training`, {
          total,
          stream: o.err,
          intervalMs: o.err.isTTY ? 100 : 10_000,
        });
      trainBar?.tick();
      if (done === total) trainBar?.finish();
    },
    onStep: (r) => {
      if (!o.quiet) o.out.write(`${formatStepLine(r)}\n`);
      o.onStep?.(r.step);
    },
  });
  // Losing NATS fails the run's requests; say so in one line with the way back (the log keeps
  // every event stored before, so --resume continues from there).
  const lostError = (cause: unknown) => {
    const lost = nats.lost();
    if (!lost) return null;
    lostReported = true;
    return new NatsLostError(nats.url, lost, `resume with: akbe train --resume --run-id ${o.runId}`, {
      cause,
    });
  };
  // Losing NATS fails the run's requests; say so in one line with the way back (the log keeps
  // every event stored before, so --resume continues from there). A wait that would not notice
  // the lost connection (a reply that can never come) must not hold the command: the
  // connection's end settles it too. Closed by us, it never settles.
  const connectionLost = nats.nc.closed().then(
    (cause) =>
      new Promise<never>((_, reject) => {
        const err = lostError(cause);
        if (err) reject(err);
      }),
  );
  const result = await Promise.race([training, connectionLost]).catch((err) => {
    throw err instanceof NatsLostError ? err : (lostError(err) ?? err);
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

/** The before-evaluation a run's log records (one score per split, in order), [] when none. */
async function recordedBeforeEval(store: EventStore, runId: string): Promise<SplitScore[]> {
  const out: SplitScore[] = [];
  for await (const { event } of store.replayType(runId, 'eval.completed')) {
    const d = event.data;
    if (d.when !== 'before') continue;
    out.push({ split: d.split, questions: d.questions, em: d.em, tc: d.tc, tp: d.tp, noToolEm: d.noToolEm });
  }
  return out;
}
