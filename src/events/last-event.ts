/**
 * The last stored event of one type in a run, by one stream get (`$JS.API.STREAM.MSG.GET`,
 * last by subject): no consumer. Roles in an account of their own (the rollout role,
 * src/actors/nats/nats-accounts.ts) may not create consumers, and read run.started this way.
 */
import type { AkbeEvent, EventOf, EventType } from './catalog.js';
import { decodeStoredEvent } from './codec.js';
import { retryElection } from './retry.js';
import type { EventStore } from './store.js';
import { EVENTS_STREAM, eventSubject } from './subjects.js';

export async function lastEventOf<K extends EventType>(
  store: EventStore,
  runId: string,
  type: K,
): Promise<{ seq: number; event: EventOf<K> } | null> {
  const subject = eventSubject(runId, type);
  const m = await retryElection(store.nc, `get last ${subject}`, () =>
    store.jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: subject }),
  );
  if (!m) return null;
  // A stored message that does not decode throws (InvalidEventError, ...): the caller's start fails
  // naming it, rather than waiting for an event that is there.
  const event: AkbeEvent = decodeStoredEvent(m.subject, m.data);
  event.meta.seq = m.seq;
  return event.type === type ? { seq: m.seq, event: event as EventOf<K> } : null;
}
