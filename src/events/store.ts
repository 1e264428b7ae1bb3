/**
 * The event store: an append-only log per run in the JetStream stream AKBE_EVENTS
 * (subjects `akbe.*.evt.>`, file storage, duplicate window), plus its dead-letter stream.
 *
 *   await using store = await EventStore.open(nc);
 *   await store.append(event);                     // awaited, Nats-Msg-Id from meta.dedupeId (keyed: useDedupeKey)
 *   await store.appendMany(events, { window: 256 }); // pipelined, every ack awaited
 *   for await (const { seq, event } of store.replay(runId)) ...
 *   const sub = await store.subscribe('run-summary', runId, async ({ event }) => ...);
 *
 * Nothing is dropped silently: an append either resolves with the stored sequence (or
 * `duplicate: true` when the dedupe id was already stored) or throws; a message a reader cannot
 * decode or validate goes to the dead-letter stream with its bytes and the reason, is reported to
 * `onDeadLetter`, and the reader carries on.
 *
 * This file is the store and its readers (replay, dead letters); the parts it delegates to:
 * streams.ts (creating the streams), append.ts (the append path), stored-messages.ts (decode or
 * dead-letter what a reader reads), subscription.ts (durable consumers for live projections).
 */
import { createHmac } from 'node:crypto';
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type AppendResult, appendEvent, appendEvents } from './append.js';
import type { AkbeEvent, EventOf, EventType } from './catalog.js';
import { type DeadLetter, parseDeadLetter } from './dead-letter.js';
import { EventStoreError } from './errors.js';
import { retryElection } from './retry.js';
import { type StoredEvent, type StoredMessageOptions, StoredMessages } from './stored-messages.js';
import { lastMatchingSeq, readStream, type StreamReadOptions } from './stream-reader.js';
import { DEFAULT_DUPLICATE_WINDOW_MS, defaultReplicas, ensureStream } from './streams.js';
import {
  DEAD_LETTER_STREAM,
  DEAD_LETTER_SUBJECTS,
  deadLetterFilter,
  EVENTS_STREAM,
  EVENTS_SUBJECTS,
  eventSubject,
  runEventsFilter,
} from './subjects.js';
import { type EventSubscription, type SubscribeOptions, subscribe } from './subscription.js';

// The types of EventStore's methods, so that its users need one import.
export type { AppendResult } from './append.js';
export type { StoredEvent } from './stored-messages.js';
export type { EventSubscription, SubscribeOptions } from './subscription.js';

/** Options of the event store: the duplicate window and stream replicas. */
export interface EventStoreOptions extends StoredMessageOptions {
  /** JetStream duplicate window for Nats-Msg-Id deduplication (default 2 minutes). */
  duplicateWindowMs?: number;
  /** Stream replicas when the store creates the streams (3 on the infra/nats/cluster setup). */
  replicas?: number;
}

/** The run log on JetStream: append (deduplicated by message id), read, subscribe and replay events of a run. */
export class EventStore implements AsyncDisposable {
  /** The live subscriptions; close() stops them. */
  private readonly subscriptions = new Set<EventSubscription>();

  /** Per-run dedupe keys (useDedupeKey): the Nats-Msg-Id of each append is keyed by its run's. */
  private readonly dedupeKeys = new Map<string, Uint8Array>();

  /** Decodes what the readers read, or dead-letters it. */
  private readonly messages: StoredMessages;

  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    opts: EventStoreOptions,
  ) {
    this.messages = new StoredMessages(js, opts);
  }

  /** Opens the store, creating AKBE_EVENTS and AKBE_DEAD_LETTERS when missing. */
  static async open(nc: NatsConnection, opts: EventStoreOptions = {}): Promise<EventStore> {
    let jsm: JetStreamManager;
    try {
      // A cluster that is electing its meta leader answers account info with timeouts for a while.
      jsm = await retryElection(nc, 'JetStream account info', () => jetstreamManager(nc));
    } catch (err) {
      throw new EventStoreError(
        `JetStream is not available on this server (start nats-server with -js): ${(err as Error).message}`,
        undefined,
        { cause: err },
      );
    }
    const s = {
      replicas: opts.replicas ?? defaultReplicas(nc),
      duplicateWindowMs: opts.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS,
    };
    await ensureStream(jsm, EVENTS_STREAM, EVENTS_SUBJECTS, s);
    // One dead letter per subject: re-finding the same bad message replaces, never piles up.
    await ensureStream(jsm, DEAD_LETTER_STREAM, DEAD_LETTER_SUBJECTS, { ...s, perSubject: 1 });
    return new EventStore(nc, jetstream(nc), jsm, opts);
  }

  /**
   * Keys the run's Nats-Msg-Ids with this process's secret for the run (message-key.ts: from its
   * credentials' seed, else the run's KV key): `<dedupeId>~<HMAC-SHA256(key, dedupeId)>`.
   * Dedupe ids are derived from an event's identity (`<run>:3:learner.step`), so anyone able to
   * publish on the stream could otherwise store a message with the id of an event the run has not
   * written yet, and JetStream would silently drop the real one as a duplicate. Replays still see
   * the plain `meta.dedupeId`; only the broker-side id needs the key.
   */
  useDedupeKey(runId: string, key: Uint8Array): void {
    this.dedupeKeys.set(runId, key);
  }

  /** The Nats-Msg-Id an event is appended with. */
  msgIdOf(event: AkbeEvent): string {
    const key = this.dedupeKeys.get(event.meta.runId);
    if (!key) return event.meta.dedupeId;
    const mac = createHmac('sha256', key).update(event.meta.dedupeId).digest('base64url');
    return `${event.meta.dedupeId}~${mac}`;
  }

  /** The message at a sequence of the events stream (the append path checks duplicate acks with it). */
  async storedAt(seq: number): Promise<{ subject: string; data: Uint8Array }> {
    const m = await retryElection(this.nc, `get ${EVENTS_STREAM} #${seq}`, () =>
      this.jsm.streams.getMessage(EVENTS_STREAM, { seq }),
    );
    if (!m)
      throw new EventStoreError(`${EVENTS_STREAM} has no message #${seq} (a duplicate ack pointed at it)`);
    return { subject: m.subject, data: m.data };
  }

  /** Appends one event and waits for JetStream's ack. Validates first (InvalidEventError). */
  async append(event: AkbeEvent, opts: { expectLastSubjectSeq?: number } = {}): Promise<AppendResult> {
    return appendEvent(this, event, opts.expectLastSubjectSeq);
  }

  /**
   * Appends events in order with up to `window` unacknowledged publishes (pipelined-publish.ts;
   * JetStream keeps the order of one connection's messages). All are validated before the first
   * is sent. Every ack is awaited; after a failure no new publish starts, and an AppendError lists
   * the dedupe ids not stored (retrying them is safe: dedupe ids make appends idempotent).
   */
  async appendMany(
    events: readonly AkbeEvent[],
    opts: { window?: number; ackTimeoutMs?: number } = {},
  ): Promise<AppendResult[]> {
    return appendEvents(this, events, opts);
  }

  /**
   * A run's events in stream order, from `fromSeq`, ending at the last event present when the
   * replay began (or following new ones with `follow` until `signal` aborts). Each event carries
   * its stream sequence in `meta.seq`. Bad messages are dead-lettered, reported and skipped.
   */
  async *replay(runId: string, opts: StreamReadOptions = {}): AsyncGenerator<StoredEvent> {
    for await (const m of readStream(this.js, EVENTS_STREAM, runEventsFilter(runId), opts)) {
      const event = await this.messages.decodeOrDeadLetter(m, 'replay');
      if (event) yield { seq: m.seq, subject: m.subject, event };
    }
  }

  /** The events of one type of a run, oldest first (reads only that type's subject). */
  async *replayType<K extends EventType>(
    runId: string,
    type: K,
    opts: StreamReadOptions = {},
  ): AsyncGenerator<Omit<StoredEvent, 'event'> & { event: EventOf<K> }> {
    for await (const m of readStream(this.js, EVENTS_STREAM, eventSubject(runId, type), opts)) {
      const event = await this.messages.decodeOrDeadLetter(m, 'replay');
      if (event?.type === type) yield { seq: m.seq, subject: m.subject, event: event as EventOf<K> };
    }
  }

  /** The dead letters (of one run, or all), oldest first. */
  async *deadLetters(runId?: string, opts: StreamReadOptions = {}): AsyncGenerator<DeadLetter> {
    for await (const m of readStream(this.js, DEAD_LETTER_STREAM, deadLetterFilter(runId), opts))
      yield parseDeadLetter(m);
  }

  /** The sequence of the newest stored event of a run, or of any run (0 when none). */
  async lastSeq(runId?: string): Promise<number> {
    return lastMatchingSeq(this.js, EVENTS_STREAM, runId ? runEventsFilter(runId) : EVENTS_SUBJECTS);
  }

  /**
   * A durable consumer for a live projection: delivers every event (of one run, or all runs) from
   * the first not yet acked by `durable`, in order, one at a time. The handler's success acks the
   * message. A failing handler is retried in process (order is kept), then its message is
   * dead-lettered as 'handler-failed' and acked. A dead letter that cannot be written leaves the
   * message unacked (redelivered later) and is reported to `onError`.
   */
  async subscribe(
    durable: string,
    runId: string | undefined,
    handler: (e: StoredEvent) => Promise<void> | void,
    opts: SubscribeOptions = {},
  ): Promise<EventSubscription> {
    const { nc, js, jsm, messages, subscriptions } = this;
    return subscribe({ nc, js, jsm, messages, subscriptions }, durable, runId, handler, opts);
  }

  /** Deletes a durable consumer (e.g. to rebuild a projection from sequence 0). */
  async deleteConsumer(durable: string): Promise<boolean> {
    return this.jsm.consumers.delete(EVENTS_STREAM, durable);
  }

  /** Stops every subscription; the connection stays open (its owner closes it). */
  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
