/**
 * The event store's append path. Every event is validated first, then published with its
 * Nats-Msg-Id (EventStore.msgIdOf: the dedupe id, keyed per run) and its ack awaited, through a
 * cluster's leader election: a retried append after a crash or an election is stored once.
 */
import { JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type AkbeEvent, validateEvent } from './catalog.js';
import { decodeEvent, encodeEvent } from './codec.js';
import { AppendError, ConcurrencyError, EventStoreError, PreemptedAppendError } from './errors.js';
import { type PipelinedFailure, publishPipelined } from './pipelined-publish.js';
import { ELECTION_RETRY_MS, isTransientNatsError, retryElection, timeoutRetryLeft } from './retry.js';
import { EVENTS_STREAM, eventSubject } from './subjects.js';

export interface AppendResult {
  seq: number;
  /** True when an event with the same dedupe id was already stored (nothing new was written). */
  duplicate: boolean;
}

/** What an append needs of the store: its connection, its JetStream client, its Nats-Msg-Ids. */
export interface AppendTarget {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  msgIdOf(event: AkbeEvent): string;
  /** The message stored at a sequence of the events stream (what a duplicate ack points at). */
  storedAt(seq: number): Promise<{ subject: string; data: Uint8Array }>;
}

/**
 * A duplicate ack says only that *some* message has the id. A retried append finds its own event
 * there (same subject, type and identity; its timestamps may differ); anything else means the id
 * was taken before the run wrote it, and the event is lost: PreemptedAppendError.
 */
async function checkDuplicate(t: AppendTarget, event: AkbeEvent, r: AppendResult): Promise<void> {
  if (!r.duplicate) return;
  const subject = eventSubject(event.meta.runId, event.type);
  const stored = await t.storedAt(r.seq);
  const refuse = (why: string) => new PreemptedAppendError(event.meta.dedupeId, r.seq, stored.subject, why);
  if (stored.subject !== subject) throw refuse(`not ${subject}`);
  let held: AkbeEvent;
  try {
    held = decodeEvent(stored.data);
  } catch (err) {
    throw refuse(`not an event: ${(err as Error).message}`);
  }
  if (
    held.type !== event.type ||
    held.meta.runId !== event.meta.runId ||
    held.meta.dedupeId !== event.meta.dedupeId
  )
    throw refuse(`another event: ${held.type} ${held.meta.dedupeId}`);
}

/** JetStream's 10071 (wrong last sequence) is a concurrency conflict; the rest are append errors. */
export function mapPublishError(err: unknown, subject: string): Error {
  if (err instanceof JetStreamApiError && err.code === 10071)
    return new ConcurrencyError(subject, err.code, { cause: err });
  // No responder on the subject: no stream stores it (the client calls it JetStreamNotEnabled).
  if (err instanceof Error && err.name === 'JetStreamNotEnabled') {
    return new EventStoreError(
      `no JetStream stream stores ${subject}: open the store with EventStore.open() (it creates ${EVENTS_STREAM}) or check the server has JetStream`,
      undefined,
      { cause: err },
    );
  }
  return err instanceof Error ? err : new Error(String(err));
}

/** Appends one event and waits for JetStream's ack. Validates first (InvalidEventError). */
export async function appendEvent(
  t: AppendTarget,
  event: AkbeEvent,
  expectLastSubjectSeq?: number,
): Promise<AppendResult> {
  validateEvent(event);
  const subject = eventSubject(event.meta.runId, event.type);
  // As appendEvents: through a cluster's leader election, not past an API error.
  return retryElection(
    t.nc,
    `append ${event.meta.dedupeId}`,
    () => publishOnce(t, event, subject, expectLastSubjectSeq),
    {
      retryable: (err) => !(err instanceof ConcurrencyError) && isTransientNatsError(err),
    },
  ).then(async (r) => {
    await checkDuplicate(t, event, r);
    return r;
  });
}

async function publishOnce(
  t: AppendTarget,
  event: AkbeEvent,
  subject: string,
  expectLastSubjectSeq?: number,
): Promise<AppendResult> {
  try {
    const ack = await t.js.publish(subject, encodeEvent(event), {
      msgID: t.msgIdOf(event),
      expect: {
        streamName: EVENTS_STREAM,
        ...(expectLastSubjectSeq !== undefined ? { lastSubjectSequence: expectLastSubjectSeq } : {}),
      },
    });
    return { seq: ack.seq, duplicate: ack.duplicate };
  } catch (err) {
    throw mapPublishError(err, subject);
  }
}

type Outcome = AppendResult | PipelinedFailure;

/**
 * Sends the failed part of a batch again, in place in `outcomes`; Nats-Msg-Id makes a second copy
 * of an event that was stored after all a duplicate. On a cluster, a node's loss leaves a stream
 * without a leader for a few seconds (no responders, or acks that time out): again until a new
 * leader answers, for ELECTION_RETRY_MS. On a single server only acks that timed out (a busy
 * machine), and what was not sent after them, for TIMEOUT_RETRY_MS (retry.ts's timeoutRetryLeft).
 */
async function republishFailed(
  nc: NatsConnection,
  outcomes: Outcome[],
  publish: (indexes: readonly number[]) => Promise<Outcome[]>,
): Promise<void> {
  const cluster = Boolean(nc.info?.cluster);
  const started = Date.now();
  const deadline = started + ELECTION_RETRY_MS;
  for (let attempt = 1, wait = 250; ; attempt++, wait = Math.min(wait * 2, 2_000)) {
    const failed = outcomes.flatMap((o, i) => ('kind' in o ? [{ i, kind: o.kind }] : []));
    const timedOut =
      failed.some((f) => f.kind === 'timeout') &&
      failed.every((f) => f.kind === 'timeout' || f.kind === 'closed');
    const again = cluster
      ? failed.filter((f) => f.kind !== 'api').map((f) => f.i)
      : timedOut
        ? failed.map((f) => f.i)
        : [];
    const spent = cluster ? Date.now() > deadline : !timeoutRetryLeft(attempt, started, Date.now(), wait);
    if (again.length === 0 || nc.isClosed() || spent) return;
    await new Promise((r) => setTimeout(r, wait));
    const retried = await publish(again);
    for (const [k, i] of again.entries()) outcomes[i] = retried[k];
  }
}

/** EventStore.appendMany: pipelined, all validated first, every ack awaited (see its comment). */
export async function appendEvents(
  t: AppendTarget,
  events: readonly AkbeEvent[],
  opts: { window?: number; ackTimeoutMs?: number } = {},
): Promise<AppendResult[]> {
  for (const e of events) validateEvent(e);
  const subjectOf = (i: number) => eventSubject(events[i].meta.runId, events[i].type);
  const publish = (indexes: readonly number[]) =>
    publishPipelined(
      t.nc,
      indexes.length,
      (k) => {
        const e = events[indexes[k]];
        return { subject: subjectOf(indexes[k]), data: encodeEvent(e), msgId: t.msgIdOf(e) };
      },
      { ...opts, expectStream: EVENTS_STREAM },
    ).then((rs) => rs.map((r) => ('kind' in r ? { ...r, index: indexes[r.index] } : r)));
  const outcomes = await publish(events.map((_, i) => i));
  await republishFailed(t.nc, outcomes, publish);
  const failures = outcomes.filter((o): o is PipelinedFailure => 'kind' in o);
  if (failures.length === 0) {
    const results = outcomes as AppendResult[];
    for (const [i, r] of results.entries()) await checkDuplicate(t, events[i], r);
    return results;
  }
  // The first real failure is the cause; 'closed' entries are the ones never sent after it.
  const first = failures.find((f) => f.kind !== 'closed') ?? failures[0];
  const subject = subjectOf(first.index);
  const cause =
    first.kind === 'api' && first.code === 10071
      ? new ConcurrencyError(subject, first.code)
      : first.kind === 'no-stream'
        ? mapPublishError(Object.assign(new Error(first.message), { name: 'JetStreamNotEnabled' }), subject)
        : new EventStoreError(`${subject}: ${first.message}`, first.code);
  throw new AppendError(
    `${failures.length} of ${events.length} events not stored (first: ${events[first.index].type} ${events[first.index].meta.dedupeId}: ${cause.message})`,
    failures.map((f) => events[f.index].meta.dedupeId),
    { cause },
  );
}
