/**
 * Phase 3 of a run (orchestrator.ts): the run machine from the first step left to the last, with
 * its two injected actors wired to NATS, and its facts mapped to events (fact-events.ts) into the
 * sink:
 *
 *   question -> rollout actor: dispatch a rollout command to the work queue (dispatch.ts), resolve
 *               from the log's rollout.completed (so a redelivered rollout counts once)
 *   learner  -> train actor:   svc.train request (trainer-service.ts), checkpoint v(k+1) published
 */
import { createActor, fromPromise, toPromise } from 'xstate';
import { trainRequestDigest } from '../../events/train-digest.js';
import type { AkbeFact } from '../../machines/facts.js';
import { learnerMachine, type TrainRequest, type TrainResult } from '../../machines/learner.js';
import { questionMachine } from '../../machines/question.js';
import type { RolloutInput, rolloutMachine } from '../../machines/rollout.js';
import { type RunOutput, runMachine } from '../../machines/run.js';
import { rowsPerUpdate } from '../../rl/mini-batch.js';
import type { TrainStepRequest } from '../../rl/train-request.js';
import type { RolloutResult } from '../../rl/types.js';
import { abortable } from '../../util/abortable.js';
import { killPoint, killPointArmed } from '../../util/kill-point.js';
import type { PublishedCheckpoint } from '../checkpoints/checkpoints.js';
import type { EventSink } from '../log/event-sink.js';
import { factToEvent } from '../log/fact-events.js';
import { requestTrain } from '../services/trainer/trainer-service.js';
import { type CompletionWatcher, type DispatchedRollout, dispatchRollout } from './dispatch.js';
import { OracleRates } from './oracle-rates.js';
import type { RunSetup } from './run-setup.js';
import { stepReport } from './step-report.js';
import { StepTimer } from './step-timing.js';
import type { TrainingOptions } from './training-options.js';

export interface StepDeps {
  watcher: CompletionWatcher;
  /** Filled with each dispatched rollout's command sequence (the deadlines name rollouts by it). */
  seqToRollout: Map<number, DispatchedRollout>;
  sink: EventSink;
  published: Map<number, PublishedCheckpoint>;
  /**
   * Sets the run's current policy version in KV once a step's version is published: the
   * orchestrator's job, not the trainer's (a trainer key that may write KV can roll the whole
   * bucket up: every run's lock, status and pointer; issue 23).
   */
  setCurrentVersion: (version: number) => Promise<void>;
  padId: number;
  log: (line: string) => void;
  /** Aborts when the run must stop now (its lock was lost): the run machine is stopped. */
  signal?: AbortSignal;
}

/** Phase 3: the run machine from the first step left to the last, its facts into the log. */
export async function runSteps(o: TrainingOptions, setup: RunSetup, d: StepDeps): Promise<RunOutput> {
  const input = setup.machineInput;
  const from = { steps: input.initialStep ?? 0, policyVersion: input.initialVersion ?? 0 };
  if (from.steps >= input.steps) return from;
  const cfg = o.spec.train;
  const { runId } = o;
  // Dispatch epoch: a resumed orchestrator's commands must not collide with the purged ones' ids.
  const epoch = Date.now();
  const timer = new StepTimer(cfg.batchQuestions * (cfg.gWithTool + cfg.gNoTool));
  const rollout = rolloutActor(o, d, timer, epoch);
  const { train, trainBatches, requestDigests } = trainActor(o, d, timer);
  const machine = runMachine.provide({
    actors: {
      // The question machine's `rollout` slot is typed as the rollout machine; any actor logic
      // with the same input and output fits at runtime (xstate's provide() is strict here).
      question: questionMachine.provide({ actors: { rollout: rollout as unknown as typeof rolloutMachine } }),
      learner: learnerMachine.provide({ actors: { train } }),
    },
  });
  // The world's oracle rates per step (learner.step.extra; the audit recomputes them).
  const oracle = new OracleRates(input.questions, input.learner.toolCallCount);
  const ctx = {
    runId,
    timing: (step: number) => timer.timing(step),
    published: (v: number) => d.published.get(v),
    trainBatch: (step: number) => trainBatches.get(step),
    requestSha256: (step: number) => requestDigests.get(step),
    extra: (step: number) => oracle.extra(step),
    offline: (questionId: string) => input.learner.offlineTargets?.[questionId],
  };
  const actor = createActor(machine, { inspect: o.inspect, input });
  let labelsSeen = 0; // of the step armed by a test kill point
  actor.on('*', (f) => {
    const fact = f as AkbeFact;
    if (fact.type === 'step.started') timer.stepStarted(fact.step);
    oracle.see(fact);
    try {
      d.sink.push(factToEvent(fact, ctx));
    } catch (err) {
      d.log(`event sink: ${(err as Error).message}`);
    }
    if (fact.type === 'boundary.labeled' && killPointArmed('labels', fact.step)) {
      labelsSeen++;
      if (labelsSeen === cfg.batchQuestions) void d.sink.flush().then(() => killPoint('labels', fact.step));
    }
    if (fact.type === 'learner.step') {
      o.onStep?.(stepReport(fact, timer.timing(fact.step)));
      trainBatches.delete(fact.step);
      requestDigests.delete(fact.step);
      timer.forget(fact.step);
      oracle.forget(fact.step);
    }
    o.onFact?.(fact);
  });
  actor.start();
  // Stopping the machine aborts its invoked actors (their waits and requests are dropped).
  const out = await abortable(toPromise(actor), d.signal).catch((err) => {
    if (d.signal?.aborted) actor.stop();
    throw err;
  });
  await d.sink.flush();
  return out;
}

/** The rollout actor: dispatches the rollout's command (unless the log has it) and resolves from the log. */
function rolloutActor(o: TrainingOptions, d: StepDeps, timer: StepTimer, epoch: number) {
  const { runId, js } = o;
  return fromPromise<RolloutResult, RolloutInput>(async ({ input, signal }) => {
    const { step, rolloutId } = input;
    if (!d.watcher.has(rolloutId))
      d.seqToRollout.set(await dispatchRollout(js, { runId, input }, epoch), { rolloutId, step });
    const result = await abortable(d.watcher.wait(input.rolloutId), signal);
    o.onRollout?.(step, timer.rolloutDone(step), timer.rolloutsPerStep);
    return result;
  });
}

/**
 * The train actor (svc.train, the checkpoint it publishes), with what learner.step records of each
 * step's request: the batch it trained on and the digest of the request as sent (both dropped
 * once the event is formed).
 */
function trainActor(o: TrainingOptions, d: StepDeps, timer: StepTimer) {
  const cfg = o.spec.train;
  const { runId, nc } = o;
  const trainBatches = new Map<number, TrainRequest['batch']>();
  const requestDigests = new Map<number, string>();
  const train = fromPromise<TrainResult, TrainRequest>(async ({ input, signal }) => {
    trainBatches.set(input.step, input.batch);
    timer.trainStarted(input.step);
    const request: TrainStepRequest = {
      step: input.step,
      policyVersion: input.policyVersion,
      batch: input.batch,
      losses: input.losses,
      lr: cfg.lr,
      epochs: cfg.ppoEpochs,
      rowsPerUpdate: rowsPerUpdate(cfg.miniBatchQuestions, cfg.gWithTool),
      padId: d.padId,
    };
    requestDigests.set(input.step, trainRequestDigest(runId, request));
    const r = await abortable(requestTrain(nc, runId, request, { signal, seed: o.signingSeed }), signal);
    // DPO: the reference's sequence logprobs the trainer computed, for learner.step's record.
    if (r.refLogp) input.batch.refLogp = Float32Array.from(r.refLogp);
    d.published.set(r.version, {
      ...r.published,
      ...(r.requestSha256 ? { requestSha256: r.requestSha256 } : {}),
    });
    await d.setCurrentVersion(r.version);
    timer.trainDone(input.step, r.metrics.trainSeconds ?? 0, r.metrics.tokensPerSecond ?? 0);
    return { version: r.version, metrics: r.metrics, checkpoint: r.published.checkpoint };
  });
  return { train, trainBatches, requestDigests };
}
