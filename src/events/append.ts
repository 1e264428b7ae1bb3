/**
 * The event store's append path. Every event is validated first, then published with its
 * Nats-Msg-Id (EventStore.msgIdOf: the dedupe id, keyed per run) and its ack awaited, through a
 * cluster's leader election: a retried append after a crash or an election is stored once.
 */
import { JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type AkbeEvent, validateEvent } from './catalog.js';
import { encodeEvent } from './codec.js';
import { AppendError, ConcurrencyError, EventStoreError } from './errors.js';
import { type PipelinedFailure, publishPipelined } from './pipelined-publish.js';
import { ELECTION_RETRY_MS, isTransientNatsError, retryElection, TIMEOUT_ATTEMPTS } from './retry.js';
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
  );
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
 * machine), and what was not sent after them, TIMEOUT_ATTEMPTS times in all (retry.ts).
 */
async function republishFailed(
  nc: NatsConnection,
  outcomes: Outcome[],
  publish: (indexes: readonly number[]) => Promise<Outcome[]>,
): Promise<void> {
  const cluster = Boolean(nc.info?.cluster);
  const deadline = Date.now() + ELECTION_RETRY_MS;
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
    const spent = cluster ? Date.now() > deadline : attempt >= TIMEOUT_ATTEMPTS;
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
  if (failures.length === 0) return outcomes as AppendResult[];
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
