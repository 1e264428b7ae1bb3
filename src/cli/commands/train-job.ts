/**
 * The training job behind `akbe train` and `akbe demo`: connects to NATS (NATS_URL, a running
 * `akbe nats up`, or an embedded nats-server), evaluates on dev before and after, runs or resumes
 * the run with the orchestrator (src/actors), and prints progress bars and one line per step.
 * The config file it starts from is job-config.ts's.
 */
import { join } from 'node:path';
import type { InspectionEvent } from 'xstate';
import { type AkbeNats, akbeHome, connectAkbeNats, NatsLostError } from '../../actors/nats/connection.js';
import { trustRecord } from '../../actors/nats/nats-trust.js';
import { formatStepLine, runTraining } from '../../actors/orchestrator/orchestrator.js';
import type { RunContext, TrainingOptions } from '../../actors/orchestrator/training-options.js';
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
import { DEFAULT_TOOLS, toolsNamed } from '../../tools/registry.js';
import { Progress } from '../../util/progress.js';
import { type JobConfig, runEvalSettings, runSpecOfJob } from './job-config.js';

// Where the config file's parts lived before job-config.ts; callers import them from here too.
export {
  ConfigFileError,
  type JobConfig,
  parseJobConfig,
  readJobConfig,
  runEvalSettings,
  runSpecOfJob,
} from './job-config.js';

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
  const spec = o.resume ? await readRunSpec(store, o.runId) : runSpecOfJob(o.job);
  const evalSettings = runEvalSettings(spec, o.job, (line) => o.err.write(`train: ${line}\n`));
  const evaluate = await jobEvaluator(spec, evalSettings, store, o.err);
  const scores = evalHooks(o, store, evalSettings, evaluate);
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
    ...(nats.trust ? { natsTrust: trustRecord(nats.trust) } : {}),
    // Once the lost connection is reported, that line stays the last: the run unwinding after it
    // (its lock, its services) has nothing to add.
    log: (line) => {
      if (!lostReported) o.err.write(`train: ${line}\n`);
    },
    beforeRun: scores.beforeRun,
    afterRun: scores.afterRun,
    ...(o.quiet ? {} : progressBars(o.err)),
    onStep: (r) => {
      if (!o.quiet) o.out.write(`${formatStepLine(r)}\n`);
      o.onStep?.(r.step);
    },
  });
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
  const { before, after } = scores;
  if (before.length && after.length) o.out.write(formatBeforeAfter(before, after));
  return {
    steps: result.steps,
    policyVersion: result.policyVersion,
    seconds: (Date.now() - t0) / 1000,
    before,
    after,
  };
}

type Evaluator = Awaited<ReturnType<typeof jobEvaluator>>;

/** The run's before / after evaluations as its hooks, and the scores they leave. */
function evalHooks(o: TrainJobOptions, store: EventStore, evalSettings: EvalSettings, evaluate: Evaluator) {
  const scores = {
    before: [] as SplitScore[],
    after: [] as SplitScore[],
    beforeRun: async (c: RunContext) => {
      // A resumed run was evaluated before its first step when it started: read those figures
      // back instead of evaluating the resume version as if it were the base.
      const recorded = o.resume ? await recordedBeforeEval(store, c.runId) : [];
      if (recorded.length > 0) scores.before = recorded;
      else if (c.version === 0) scores.before = await evaluate(c.nc, c.runId, c.version, 'before');
      else if (evalSettings.questions > 0)
        o.err.write(
          `eval before: not on the log of ${c.runId} (interrupted first); skipped at v${c.version}\n`,
        );
    },
    afterRun: async (c: RunContext) => {
      scores.after = await evaluate(c.nc, c.runId, c.version, 'after');
    },
  };
  return scores;
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

/**
 * The before/after evaluation of a run: each split rolled out like the run's workers (its
 * environment, tools and limits), one line per split, and an eval.completed event on the log
 * (so that `akbe experiment report` folds final figures without re-evaluating).
 */
async function jobEvaluator(
  spec: RunSpec,
  evalSettings: EvalSettings,
  store: EventStore,
  err: NodeJS.WritableStream,
): Promise<
  (nc: AkbeNats['nc'], runId: string, version: number, when: 'before' | 'after') => Promise<SplitScore[]>
> {
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
      err.write(
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
  return evaluate;
}

/** One progress bar per step's rollouts and one per step's training, on `err`. */
function progressBars(
  err: NodeJS.WritableStream & { isTTY?: boolean },
): Pick<TrainingOptions, 'onRollout' | 'onTrainProgress'> {
  const bars = new Map<number, Progress>();
  let trainBar: Progress | null = null;
  return {
    onRollout: (step, done, total) => {
      // One bar per step: with maxStaleness >= 1 the rollouts of two steps arrive interleaved.
      let bar = bars.get(step);
      if (!bar) {
        bar = new Progress(`step ${step} rollouts`, {
          total,
          stream: err,
          intervalMs: err.isTTY ? 100 : 10_000,
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
      if (done === 1)
        trainBar = new Progress(`step ${step} training`, {
          total,
          stream: err,
          intervalMs: err.isTTY ? 100 : 10_000,
        });
      trainBar?.tick();
      if (done === total) trainBar?.finish();
    },
  };
}
