/**
 * No rollout wait without an end. The orchestrator waits for each dispatched rollout's
 * `rollout.completed`; two things end a wait that would otherwise last forever:
 *
 * - Out of deliveries: JetStream gives a command up after the consumer's `max_deliver` attempts
 *   and says so on `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>` (JSON with the
 *   command's `stream_seq`). The rollout becomes a terminal failure, RolloutGaveUpError, whose
 *   message names the rollout and the cause: the last worker's error, kept as the command's
 *   dead letter (rollout-worker.ts), or "no worker acked it" when the workers died or stalled.
 * - Stall: no rollout of the run completed for `stallMs` while some are awaited (no worker at
 *   all, a policy service that never answers...): RolloutsStalledError names what is awaited and
 *   the likely fix.
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { DLQ_HEADERS } from '../../events/dead-letter.js';
import { decodeAtEdge, type EdgeGate } from '../../events/edge-gate.js';
import { int, object, string } from '../../events/schema.js';
import { COMMAND_STREAM, DEAD_LETTER_STREAM, deadLetterSubject } from '../../events/subjects.js';
import { rolloutConsumerName } from '../rollout/protocol.js';
import type { CompletionWatcher, DispatchedRollout } from './dispatch.js';

export class RolloutGaveUpError extends Error {
  constructor(
    readonly runId: string,
    readonly rolloutId: string,
    readonly reason: string,
    readonly step: number,
  ) {
    super(`run ${runId}: rollout ${rolloutId} gave up after its delivery attempts: ${reason}`);
    this.name = 'RolloutGaveUpError';
  }
}

export class RolloutsStalledError extends Error {
  constructor(
    readonly runId: string,
    readonly pending: string[],
    readonly stallMs: number,
  ) {
    super(
      `run ${runId}: no rollout completed for ${Math.round(stallMs / 1000)} s while ${pending.length} are awaited (e.g. ${pending[0]}); are rollout workers and the policy and search services running? (akbe worker --run-id ${runId} --role all)`,
    );
    this.name = 'RolloutsStalledError';
  }
}

export function maxDeliveriesSubject(runId: string): string {
  return `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${COMMAND_STREAM}.${rolloutConsumerName(runId)}`;
}

const advisory = object<{ stream_seq: number }>({ stream_seq: int({ min: 1 }) });

export interface DeadlineOptions {
  nc: NatsConnection;
  jsm: JetStreamManager;
  runId: string;
  watcher: CompletionWatcher;
  /** The rollout of a dispatched command's stream sequence. */
  rolloutOfSeq: (seq: number) => DispatchedRollout | undefined;
  edge: EdgeGate;
  stallMs: number;
}

/** Starts both deadlines; returns the function that stops them. */
export function enforceRolloutDeadlines(o: DeadlineOptions): () => void {
  const sub = o.nc.subscribe(maxDeliveriesSubject(o.runId), {
    callback: (err, msg) => {
      if (err) return;
      // Only the fields we read are checked (the advisory carries more: stream, consumer, ...).
      const a = o.edge.admit(
        msg,
        (d) =>
          decodeAtEdge('max-deliveries advisory', () => {
            const v = JSON.parse(new TextDecoder().decode(d)) as Record<string, unknown>;
            advisory.check({ stream_seq: v.stream_seq }, 'advisory');
            string().check(v.type, 'advisory.type');
            return { stream_seq: v.stream_seq as number };
          }),
        false,
      );
      const rollout = a ? o.rolloutOfSeq(a.stream_seq) : undefined;
      if (!a || !rollout) return;
      const { rolloutId, step } = rollout;
      void causeOf(o, a.stream_seq).then((reason) =>
        o.watcher.fail(rolloutId, new RolloutGaveUpError(o.runId, rolloutId, reason, step)),
      );
    },
  });
  const timer = setInterval(
    () => {
      const pending = o.watcher.pending();
      if (pending.length === 0 || Date.now() - o.watcher.lastProgressAt < o.stallMs) return;
      const err = new RolloutsStalledError(o.runId, pending, o.stallMs);
      for (const id of pending) o.watcher.fail(id, err);
    },
    Math.min(1_000, o.stallMs),
  );
  timer.unref();
  return () => {
    clearInterval(timer);
    sub.unsubscribe();
  };
}

/** The last worker's error, from the command's dead letter; a generic cause when there is none. */
async function causeOf(o: DeadlineOptions, seq: number): Promise<string> {
  const subject = deadLetterSubject(o.runId, 'handler-failed', `${COMMAND_STREAM}${seq}`);
  try {
    const m = await o.jsm.streams.getMessage(DEAD_LETTER_STREAM, { last_by_subj: subject });
    const detail = m?.header?.get(DLQ_HEADERS.detail);
    if (detail) return detail;
  } catch {
    // no dead letter: the workers never reported a failure
  }
  return 'no worker acked it in time (workers died or stalled)';
}
