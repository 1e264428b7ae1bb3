/**
 * The orchestrator: runs the run machine (src/machines/run.ts) for one training run, with its
 * side effects wired to NATS:
 *
 *   question -> rollout actor: dispatch a rollout command to the work queue (dispatch.ts), resolve
 *               from the log's rollout.completed (so a redelivered rollout counts once)
 *   learner  -> train actor:   svc.train request (trainer-service.ts), checkpoint v(k+1) published
 *   facts    -> event log:     event-sink.ts (windowed appends, dedupe ids, seeds)
 *
 * The log holds everything an auditor needs to recompute rewards, labels, targets, advantages and
 * step metrics: run.started (the whole config, seeds, world and base policy), question.assigned
 * (text and gold answers per step), every rollout's tokens, logprobs, mask, answer, formatOk,
 * tool calls and seed, group rewards, labels with their tie-break seeds, learner.step with the
 * mini-batch seed, policy.published with the checkpoint's sha256.
 *
 * Resume (`resume: true`): the log says where the run stands. The last policy.published gives the
 * version and the step to continue from; rollouts already stored are not dispatched again (their
 * results come from the log); every fact already in the log is skipped by the sink; commands of the
 * crashed orchestrator still queued are purged.
 */
import { join } from 'node:path';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { createActor, fromPromise, type InspectionEvent, toPromise } from 'xstate';
import { type AkbeEvent, createEvent, type EventOf } from '../events/catalog.js';
import type { EventStore } from '../events/store.js';
import type { AkbeFact } from '../machines/facts.js';
import { learnerMachine, type TrainRequest, type TrainResult } from '../machines/learner.js';
import { type QuestionSpec, questionMachine } from '../machines/question.js';
import type { RolloutInput, rolloutMachine } from '../machines/rollout.js';
import { runMachine } from '../machines/run.js';
import type { TrainConfig } from '../rl/config.js';
import { lossTermsFor } from '../rl/losses.js';
import type { BoundaryCategory, RolloutResult } from '../rl/types.js';
import type { WorldQuestion } from '../world/questions.js';
import { CheckpointStore, type PublishedCheckpoint } from './checkpoints.js';
import {
  CompletionWatcher,
  type DispatchOptions,
  dispatchRollout,
  ensureRolloutQueue,
  purgeRolloutCommands,
} from './dispatch.js';
import { EventSink, factToEvent, type StepTiming, stepOfRolloutId } from './event-sink.js';
import { type Role, type RunSpec, type StartedRoles, startRoles } from './roles.js';
import { requestTrain, trainProgressSubject } from './trainer-service.js';

export class ResumeError extends Error {
  constructor(
    readonly runId: string,
    message: string,
  ) {
    super(`run ${runId}: ${message}`);
    this.name = 'ResumeError';
  }
}

export interface TrainingOptions {
  nc: NatsConnection;
  js: JetStreamClient;
  store: EventStore;
  runId: string;
  spec: RunSpec;
  /** Directory of this run's files (checkpoints/v<k>). */
  runDir: string;
  /** Roles to run in this process (default all: the embedded single-process setup). */
  roles?: readonly Role[];
  concurrency?: number;
  resume?: boolean;
  dispatch?: DispatchOptions;
  device?: 'cpu' | 'webgpu' | 'cuda' | 'auto';
  threads?: number;
  inspect?: (event: InspectionEvent) => void;
  /** Every fact of the run machine tree, after it is handed to the sink. */
  onFact?: (fact: AkbeFact) => void;
  /** A rollout of the current step finished (progress bars). */
  onRollout?: (step: number, done: number, total: number) => void;
  /** The trainer finished optimizer update `done` of `total` of a step (progress bars). */
  onTrainProgress?: (step: number, done: number, total: number) => void;
  /** A learner step finished: its line. */
  onStep?: (report: StepReport) => void;
  /** Hooks around the run (dev evaluation): called with the version then served. */
  beforeRun?: (ctx: RunContext) => Promise<void>;
  afterRun?: (ctx: RunContext) => Promise<void>;
  log?: (line: string) => void;
  akbeVersion?: string;
}

export interface RunContext {
  nc: NatsConnection;
  runId: string;
  version: number;
}

export interface StepReport {
  step: number;
  policyVersion: number;
  em: number;
  noToolEm: number;
  tc: number;
  tp: number | null;
  categories: Record<BoundaryCategory, number>;
  boundaryShifts: number;
  tokensPerSecond: number;
  rolloutSeconds: number;
  trainSeconds: number;
  loss: number;
}

export interface TrainingResult {
  runId: string;
  steps: number;
  policyVersion: number;
  elapsedSeconds: number;
  resumedFrom: { step: number; version: number } | null;
}

/** A world question as the machines see it (prompts tokenized with the world's templates). */
export function questionSpecOf(
  q: WorldQuestion,
  prompt: (path: 'with-tool' | 'no-tool', text: string) => number[],
): QuestionSpec {
  return {
    id: q.id,
    gold: q.golden_answers,
    text: q.question,
    split: `${q.split}/${q.hop}`,
    withToolPrompt: prompt('with-tool', q.question),
    noToolPrompt: prompt('no-tool', q.question),
  };
}

interface LogState {
  known: Set<string>;
  runStarted: EventOf<'run.started'> | null;
  lastPublished: { step: number; version: number } | null;
  lastCategory: Record<string, BoundaryCategory>;
  finished: boolean;
}

async function readLog(store: EventStore, runId: string): Promise<LogState> {
  const s: LogState = {
    known: new Set(),
    runStarted: null,
    lastPublished: null,
    lastCategory: {},
    finished: false,
  };
  for await (const { event } of store.replay(runId)) {
    s.known.add(event.meta.dedupeId);
    const e = event as AkbeEvent;
    if (e.type === 'run.started') s.runStarted = e;
    else if (e.type === 'policy.published' && e.data.version > 0)
      s.lastPublished = { step: e.meta.step, version: e.data.version };
    else if (e.type === 'boundary.labeled') s.lastCategory[e.meta.questionId] = e.data.category;
    else if (e.type === 'run.finished') s.finished = true;
  }
  return s;
}

/** Runs (or resumes) a training run to its last step. */
export async function runTraining(o: TrainingOptions): Promise<TrainingResult> {
  const { nc, js, store, runId, spec } = o;
  const cfg: TrainConfig = spec.train;
  const log = o.log ?? (() => undefined);
  const started = performance.now();
  // Dispatch epoch: a resumed orchestrator's commands must not collide with the purged ones' ids.
  const epoch = Date.now();

  // ---- where the run stands ----------------------------------------------------------------
  const state = await readLog(store, runId);
  if (!o.resume && state.runStarted)
    throw new ResumeError(runId, 'already has events; pass --resume to continue it or pick another --run-id');
  if (o.resume && !state.runStarted) throw new ResumeError(runId, 'has no run.started event to resume from');
  if (state.finished) throw new ResumeError(runId, 'is already finished');
  const resumedFrom = o.resume
    ? { step: state.lastPublished?.step ?? -1, version: state.lastPublished?.version ?? 0 }
    : null;
  const initialVersion = resumedFrom?.version ?? 0;
  const initialStep = resumedFrom ? resumedFrom.step + 1 : 0;

  const checkpoints = await CheckpointStore.open(nc, runId, join(o.runDir, 'checkpoints'));
  const published = new Map<number, Omit<PublishedCheckpoint, never>>();
  await ensureRolloutQueue(o.store.jsm, runId, o.dispatch);
  if (o.resume) {
    const purged = await purgeRolloutCommands(o.store.jsm, runId);
    log(
      `resume: run ${runId} at step ${initialStep}, policy v${initialVersion}; ${purged} stale rollout commands purged`,
    );
  }
  // ---- the world and the policy's context ---------------------------------------------------
  const { readQuestions, readWorldTokenizer } = await import('../world/files.js');
  const { promptIds } = await import('../world/prompts.js');
  const { readFile } = await import('node:fs/promises');
  const tok = await readWorldTokenizer(spec.worldDir);
  const questions = (await readQuestions(spec.worldDir, 'train')).map((q) =>
    questionSpecOf(q, (path, text) => promptIds(tok, path, text)),
  );
  const modelDir = o.resume ? await checkpoints.local(initialVersion) : spec.basePolicy;
  const context = (
    JSON.parse(await readFile(join(modelDir, 'config.json'), 'utf8')) as { n_positions: number }
  ).n_positions;
  const longestPrompt = Math.max(
    ...questions.flatMap((q) => [q.withToolPrompt.length, q.noToolPrompt.length]),
  );
  // Prompt + response must fit the policy's context (and the training graph's T = context).
  const maxResponseTokens = Math.min(cfg.maxResponseTokens, context - longestPrompt);
  if (maxResponseTokens < cfg.maxResponseTokens)
    log(
      `maxResponseTokens ${cfg.maxResponseTokens} -> ${maxResponseTokens}: the policy's context is ${context} tokens`,
    );

  const sink = new EventSink(store, { known: state.known });
  if (!o.resume) {
    // Version 0 is the base policy: run.started's policyRef names it; policy.published is for the
    // versions training makes (step k publishes k+1).
    published.set(0, await checkpoints.importBase(spec.basePolicy));
    sink.push(
      createEvent(
        'run.started',
        {
          algo: cfg.algo === 'akbe' ? 'grpo+akbe' : 'grpo',
          // Flat: every TrainConfig key at the top level (what an auditor reads), the effective
          // response limit, the batch padding and where the world and base policy are.
          config: JSON.parse(
            JSON.stringify({
              ...cfg,
              configuredMaxResponseTokens: cfg.maxResponseTokens,
              maxResponseTokens,
              padId: tok.pad,
              padTo: context,
              questionPoolSize: questions.length,
              worldDir: spec.worldDir,
              basePolicy: spec.basePolicy,
              topK: spec.topK,
            }),
          ),
          seeds: { run: cfg.seed },
          worldRef: spec.worldDir,
          policyRef: spec.basePolicy,
          akbeVersion: o.akbeVersion ?? '0.1.0',
        },
        { runId, step: 0, policyVersion: 0 },
      ),
    );
  }
  await checkpoints.setStatus('running');
  await sink.flush();

  // ---- roles in this process ------------------------------------------------------------------
  const roles = o.roles ?? ['search', 'policy', 'trainer', 'rollout'];
  let services: StartedRoles | null = null;
  const watcher = new CompletionWatcher(js, runId);
  let stopProgress = () => {};
  try {
    services = await startRoles(nc, js, store, checkpoints, runId, spec, roles, {
      version: initialVersion,
      concurrency: o.concurrency,
      device: o.device,
      threads: o.threads,
      inspect: o.inspect,
      log,
    });
    await watcher.start((err) => log(`completion watcher: ${err.message}`));
    const progressSub = nc.subscribe(trainProgressSubject(runId), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const p = msg.json<{ step: number; done: number; total: number }>();
          o.onTrainProgress?.(p.step, p.done, p.total);
        } catch {
          // progress is best effort
        }
      },
    });
    stopProgress = () => progressSub.unsubscribe();
    await o.beforeRun?.({ nc, runId, version: initialVersion });

    // ---- timing per step, for the learner.step event and the step line ----------------------
    const stepStart = new Map<number, number>();
    const rolledOut = new Map<number, number>();
    const trainTiming = new Map<number, { seconds: number; tokensPerSecond: number }>();
    const perStep = new Map<number, number>();
    const total = cfg.batchQuestions * (cfg.gWithTool + cfg.gNoTool);
    const timing = (step: number): StepTiming | undefined => {
      const t0 = stepStart.get(step);
      const t1 = rolledOut.get(step);
      const tr = trainTiming.get(step);
      if (t0 === undefined || t1 === undefined || !tr) return undefined;
      return {
        rolloutSeconds: (t1 - t0) / 1000,
        trainSeconds: tr.seconds,
        tokensPerSecond: tr.tokensPerSecond,
      };
    };

    const rollout = fromPromise<RolloutResult, RolloutInput>(async ({ input }) => {
      const step = stepOfRolloutId(input.rolloutId) ?? 0;
      if (!watcher.has(input.rolloutId)) await dispatchRollout(js, { runId, step, input }, epoch);
      const result = await watcher.wait(input.rolloutId);
      const done = (perStep.get(step) ?? 0) + 1;
      perStep.set(step, done);
      if (done === total) rolledOut.set(step, performance.now());
      o.onRollout?.(step, done, total);
      return result;
    });
    // The batch each step trained on, for learner.step.batch (dropped once the event is formed).
    const trainBatches = new Map<number, TrainRequest['batch']>();
    const train = fromPromise<TrainResult, TrainRequest>(async ({ input }) => {
      trainBatches.set(input.step, input.batch);
      rolledOut.set(input.step, rolledOut.get(input.step) ?? performance.now());
      const r = await requestTrain(nc, runId, {
        step: input.step,
        policyVersion: input.policyVersion,
        batch: input.batch,
        losses: input.losses,
        lr: cfg.lr,
        epochs: cfg.ppoEpochs,
        rowsPerUpdate: cfg.miniBatchQuestions * (cfg.gWithTool + 1),
        padId: tok.pad,
      });
      published.set(r.version, r.published);
      trainTiming.set(input.step, {
        seconds: r.metrics.trainSeconds ?? 0,
        tokensPerSecond: r.metrics.tokensPerSecond ?? 0,
      });
      return { version: r.version, metrics: r.metrics, checkpoint: r.published.checkpoint };
    });

    let finalVersion = initialVersion;
    let stepsDone = initialStep;
    if (initialStep < cfg.steps) {
      const machine = runMachine.provide({
        actors: {
          // The question machine's `rollout` slot is typed as the rollout machine; any actor logic
          // with the same input and output fits at runtime (xstate's provide() is strict here).
          question: questionMachine.provide({
            actors: { rollout: rollout as unknown as typeof rolloutMachine },
          }),
          learner: learnerMachine.provide({ actors: { train } }),
        },
      });
      const actor = createActor(machine, {
        inspect: o.inspect,
        input: {
          runSeed: cfg.seed,
          steps: cfg.steps,
          questions,
          batchQuestions: cfg.batchQuestions,
          gWithTool: cfg.gWithTool,
          gNoTool: cfg.gNoTool,
          limits: { maxToolCalls: cfg.maxToolCalls, maxResponseTokens },
          sampling: { temperature: cfg.temperature, topP: cfg.topP },
          initialVersion,
          initialStep,
          learner: {
            miniBatchQuestions: cfg.miniBatchQuestions,
            algo: cfg.algo,
            advantage: cfg.advantage,
            targetSelection: cfg.targetSelection,
            targetContext: cfg.targetContext,
            losses: lossTermsFor(cfg),
            padId: tok.pad,
            padTo: context,
            initialLastCategory: state.lastCategory,
          },
        },
      });
      const ctx = {
        runId,
        timing,
        published: (v: number) => published.get(v),
        trainBatch: (step: number) => trainBatches.get(step),
      };
      actor.on('*', (f) => {
        const fact = f as AkbeFact;
        if (fact.type === 'step.started') stepStart.set(fact.step, performance.now());
        try {
          sink.push(factToEvent(fact, ctx));
        } catch (err) {
          log(`event sink: ${(err as Error).message}`);
        }
        if (fact.type === 'learner.step') trainBatches.delete(fact.step);
        if (fact.type === 'learner.step') o.onStep?.(stepReport(fact, timing(fact.step)));
        o.onFact?.(fact);
      });
      actor.start();
      const out = await toPromise(actor);
      finalVersion = out.policyVersion;
      stepsDone = out.steps;
      await sink.flush();
    }
    await o.afterRun?.({ nc, runId, version: finalVersion });
    const elapsedSeconds = (performance.now() - started) / 1000;
    sink.push(
      createEvent(
        'run.finished',
        { status: 'completed', stepsCompleted: stepsDone, elapsedSeconds },
        { runId, step: Math.max(0, stepsDone - 1), policyVersion: finalVersion },
      ),
    );
    await sink.flush();
    await checkpoints.setStatus('completed');
    return { runId, steps: stepsDone, policyVersion: finalVersion, elapsedSeconds, resumedFrom };
  } catch (err) {
    await checkpoints.setStatus('failed').catch(() => undefined);
    await sink.flush().catch(() => undefined);
    throw err;
  } finally {
    stopProgress();
    await watcher.stop().catch(() => undefined);
    await services?.stop();
  }
}

function stepReport(
  fact: Extract<AkbeFact, { type: 'learner.step' }>,
  t: StepTiming | undefined,
): StepReport {
  const s = fact.stepMetrics;
  return {
    step: fact.step,
    policyVersion: fact.policyVersion,
    em: s.withToolEm,
    noToolEm: s.noToolEm,
    tc: s.meanToolCalls,
    tp: s.meanToolCalls > 0 ? s.withToolEm / s.meanToolCalls : null,
    categories: { ...s.categories },
    boundaryShifts: s.boundaryShifts,
    tokensPerSecond: t?.tokensPerSecond ?? 0,
    rolloutSeconds: t?.rolloutSeconds ?? 0,
    trainSeconds: t?.trainSeconds ?? 0,
    loss: fact.trainMetrics.loss ?? 0,
  };
}

/** One line per step: `step 1 v1  EM 0.312 (nt 0.250)  TC 1.20  TP 0.26  td/eff/hal/bw 3/2/1/2  shifts 2  ...`. */
export function formatStepLine(r: StepReport): string {
  const c = r.categories;
  const f = (x: number | null, d = 3) => (x === null ? '-' : x.toFixed(d));
  return (
    `step ${r.step} v${r.policyVersion}  EM ${f(r.em)} (no-tool ${f(r.noToolEm)})  TC ${f(r.tc, 2)}  TP ${f(r.tp)}  ` +
    `tool-dep/eff/halluc/both-wrong ${c['tool-dependent']}/${c.efficiency}/${c.hallucination}/${c['both-wrong']}  ` +
    `shifts ${r.boundaryShifts}  ${Math.round(r.tokensPerSecond)} tok/s  rollout ${r.rolloutSeconds.toFixed(1)}s  train ${r.trainSeconds.toFixed(1)}s  loss ${f(r.loss, 4)}`
  );
}
