/**
 * The orchestrator: runs the run machine (src/machines/run.ts) for one training run, with its
 * side effects wired to NATS. `runTraining` reads as its phases:
 *
 *   openRun      (run-start.ts)    where the run stands, what it loads, its pure setup, run.started
 *   RunServices  (run-services.ts) the roles of this process, the completion watcher, deadlines
 *   runSteps     (run-steps.ts)    the run machine's steps: rollouts, training, facts -> event log
 *   finish       (here)            run.finished, completed or failed with its one-line reason
 *
 * all of it holding the run's lock (run-lock.ts): one orchestrator per run.
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
import { createEvent } from '../../events/catalog.js';
import { RunLock, RunLockLostError } from '../nats/run-lock.js';
import { offlineTargets } from './offline-targets.js';
import { RolloutGaveUpError, RolloutsStalledError } from './rollout-deadlines.js';
import { RunServices } from './run-services.js';
import { type OpenedRun, openRun } from './run-start.js';
import { runSteps } from './run-steps.js';
import type { TrainingOptions, TrainingResult } from './training-options.js';

export { RunLockedError, RunLockLostError } from '../nats/run-lock.js';
export { questionSpecOf, ResumeError } from './run-start.js';
export { formatStepLine, type StepReport } from './step-report.js';
export type { RunContext, TrainingOptions, TrainingResult } from './training-options.js';

/**
 * Runs (or resumes) a training run to its last step. The run's lock (run-lock.ts) is held from
 * before its log is read until it ends, however it ends: a second orchestrator on the run is
 * refused with RunLockedError, and one that lost the lock stops with RunLockLostError.
 */
export async function runTraining(o: TrainingOptions): Promise<TrainingResult> {
  const log = o.log ?? (() => undefined);
  const lock = await RunLock.acquire(o.nc, o.runId, { log, heartbeatMs: o.lockHeartbeatMs });
  try {
    return await trainHoldingLock(o, lock, log);
  } finally {
    await lock.release();
  }
}

async function trainHoldingLock(
  o: TrainingOptions,
  lock: RunLock,
  log: (line: string) => void,
): Promise<TrainingResult> {
  const { nc, runId } = o;
  const started = performance.now();
  const run = await openRun(o, log);
  const { checkpoints, loaded, setup, sink } = run;
  // Lost: not one more event from this orchestrator (the new holder writes the run now).
  const stopWriting = () => sink.close(lock.signal.reason as Error);
  lock.signal.addEventListener('abort', stopWriting, { once: true });
  const services = new RunServices(o, log);
  try {
    lock.signal.throwIfAborted();
    await services.start(checkpoints, setup, loaded.env);
    // offline-akbe: the frozen checkpoint's targets, read back from the log or rolled out once now.
    const offline = await offlineTargets(o, setup, { env: loaded.env, tools: loaded.tools, log });
    if (offline) setup.machineInput.learner.offlineTargets = offline;
    await o.beforeRun?.({ nc, runId, version: setup.machineInput.initialVersion ?? 0 });
    const out = await runSteps(o, setup, {
      watcher: services.watcher,
      seqToRollout: services.seqToRollout,
      sink,
      published: run.published,
      setCurrentVersion: (v) => checkpoints.setCurrentVersion(v),
      padId: loaded.padId,
      log,
      signal: lock.signal,
    });
    lock.signal.throwIfAborted();
    await o.afterRun?.({ nc, runId, version: out.policyVersion });
    const elapsedSeconds = (performance.now() - started) / 1000;
    sink.push(
      createEvent(
        'run.finished',
        { status: 'completed', stepsCompleted: out.steps, elapsedSeconds },
        { runId, step: Math.max(0, out.steps - 1), policyVersion: out.policyVersion },
      ),
    );
    lock.signal.throwIfAborted();
    await sink.flush();
    await run.pruned();
    await checkpoints.setStatus('completed');
    return {
      runId,
      steps: out.steps,
      policyVersion: out.policyVersion,
      elapsedSeconds,
      resumedFrom: run.resumed,
    };
  } catch (err) {
    throw await recordFailure(o, run, err, started);
  } finally {
    lock.signal.removeEventListener('abort', stopWriting);
    await services.stop();
  }
}

/**
 * A failed run: its status, and run.finished (failed, with the one-line reason) appended before
 * the error goes up, so that `akbe runs` and a grid rerun see it ended (issue 21 item 6). Not
 * when the run lost its lock (the new holder writes it) or its connection (nothing can be written;
 * the run resumes from its log, docs/experiments.md). Returns the error to throw: what went wrong
 * in one line, not the machine's wrapper error.
 */
async function recordFailure(
  o: TrainingOptions,
  { checkpoints, setup, sink }: OpenedRun,
  err: unknown,
  started: number,
): Promise<unknown> {
  // The run is another orchestrator's now: its status and its log are not ours to write.
  const lost = causeIn(err, RunLockLostError);
  if (lost) return lost;
  const gaveUp = causeIn(err, RolloutGaveUpError);
  const cause = gaveUp ?? causeIn(err, RolloutsStalledError) ?? err;
  if (o.nc.isClosed()) return cause;
  await checkpoints.setStatus('failed').catch(() => undefined);
  // What the sink still holds goes first; a sink that failed (the cause, maybe) keeps the rest.
  await sink.flush().catch(() => undefined);
  const last = sink.lastPushed;
  const version = Math.max(setup.machineInput.initialVersion ?? 0, last?.policyVersion ?? 0);
  const reason = String((cause as Error)?.message ?? cause).split('\n')[0];
  const step = gaveUp ? gaveUp.step : (last?.step ?? 0);
  const finished = createEvent(
    'run.finished',
    {
      status: 'failed',
      reason,
      stepsCompleted: version,
      elapsedSeconds: (performance.now() - started) / 1000,
    },
    { runId: o.runId, step, policyVersion: version },
  );
  await o.store.append(finished).catch((e: Error) => o.log?.(`run.finished not stored: ${e.message}`));
  return cause;
}

/** The first error of class `C` in `err`'s cause chain. */
function causeIn<C extends Error>(err: unknown, C: new (...args: never[]) => C): C | undefined {
  for (let e = err; e instanceof Error; e = e.cause) if (e instanceof C) return e;
  return undefined;
}
