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
 */
import { createHmac } from 'node:crypto';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type AkbeEvent, type EventOf, type EventType, validateEvent } from './catalog.js';
import { decodeStoredEvent, encodeEvent } from './codec.js';
import { consumeOptions, debugConsumer } from './consume.js';
import {
  type DeadLetter,
  type DeadLetterReport,
  deadLetterFromStream,
  parseDeadLetter,
} from './dead-letter.js';
import {
  AppendError,
  ConcurrencyError,
  EventStoreError,
  InvalidEventError,
  UnsupportedEventVersionError,
} from './errors.js';
import { type PipelinedFailure, publishPipelined } from './pipelined-publish.js';
import { ELECTION_RETRY_MS, isTransientNatsError, retryElection } from './retry.js';
import { lastMatchingSeq, readStream, type StreamReadOptions } from './stream-reader.js';
import {
  DEAD_LETTER_STREAM,
  DEAD_LETTER_SUBJECTS,
  type DeadLetterReason,
  deadLetterFilter,
  EVENTS_STREAM,
  EVENTS_SUBJECTS,
  eventSubject,
  runEventsFilter,
} from './subjects.js';
import { UPCASTERS, type UpcasterRegistry } from './upcast.js';

export interface StoredEvent {
  seq: number;
  subject: string;
  event: AkbeEvent;
}

export interface AppendResult {
  seq: number;
  /** True when an event with the same dedupe id was already stored (nothing new was written). */
  duplicate: boolean;
}

export interface EventStoreOptions {
  /** JetStream duplicate window for Nats-Msg-Id deduplication (default 2 minutes). */
  duplicateWindowMs?: number;
  /** Stream replicas when the store creates the streams (3 on the infra/nats/cluster setup). */
  replicas?: number;
  /** Called for every message a reader sent to the dead letters (default: one line on stderr). */
  onDeadLetter?: (report: DeadLetterReport) => void;
  upcasters?: UpcasterRegistry;
}

export interface SubscribeOptions {
  /** In-process retries of a failing handler before its message is dead-lettered (default 3). */
  handlerRetries?: number;
  /** Called when the subscription hits an error it cannot handle (e.g. dead letters unwritable). */
  onError?: (err: Error) => void;
}

export interface EventSubscription extends AsyncDisposable {
  readonly durable: string;
  /** Messages handled (events and dead letters) since subscribe. */
  readonly processed: number;
  /** Stops consuming; already-delivered messages finish first. */
  stop(): Promise<void>;
  /** Resolves when consumption ends (after stop, or when the connection closes). */
  readonly done: Promise<void>;
}

const DEFAULT_DUPLICATE_WINDOW_MS = 2 * 60_000;
const nanos = (ms: number) => ms * 1_000_000;

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

async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  subjects: string,
  opts: { replicas: number; duplicateWindowMs: number; perSubject?: number },
) {
  try {
    const info = await retryElection(jsm, `stream info ${name}`, () => jsm.streams.info(name));
    if (!info.config.subjects?.includes(subjects)) {
      throw new EventStoreError(
        `stream ${name} exists with subjects ${JSON.stringify(info.config.subjects)}, expected ${subjects}: delete or fix it`,
      );
    }
    return;
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== 10059) {
      if (err instanceof EventStoreError) throw err;
      throw new EventStoreError(
        `cannot read stream ${name}: ${(err as Error).message}`,
        (err as JetStreamApiError).code,
        { cause: err },
      );
    }
  }
  try {
    await retryElection(jsm, `create stream ${name}`, () =>
      jsm.streams.add({
        name,
        subjects: [subjects],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        num_replicas: opts.replicas,
        duplicate_window: nanos(opts.duplicateWindowMs),
        ...(opts.perSubject ? { max_msgs_per_subject: opts.perSubject } : {}),
      }),
    );
  } catch (err) {
    // Another process may have created it between info and add.
    if (err instanceof JetStreamApiError && err.code === 10058) return;
    throw new EventStoreError(
      `cannot create stream ${name}: ${(err as Error).message}`,
      (err as JetStreamApiError).code,
      { cause: err },
    );
  }
}

/**
 * Replicas for newly created streams: AKBE_NATS_REPLICAS when set; otherwise 3 on a clustered
 * server (infra/nats/cluster is three nodes) and 1 on a single one.
 */
export function defaultReplicas(nc: NatsConnection, env: NodeJS.ProcessEnv = process.env): number {
  const fromEnv = Number(env.AKBE_NATS_REPLICAS);
  if (Number.isInteger(fromEnv) && fromEnv >= 1 && fromEnv <= 5) return fromEnv;
  return nc.info?.cluster ? 3 : 1;
}

function defaultDeadLetterReporter(r: DeadLetterReport): void {
  process.stderr.write(
    `akbe: dead-lettered ${r.originalSubject}${r.origin ? ` (seq ${r.origin.seq})` : ''}: ${r.reason}: ${r.detail} -> ${r.deadLetterSubject}\n`,
  );
}

export class EventStore implements AsyncDisposable {
  private readonly subscriptions = new Set<EventSubscription>();

  /** Per-run dedupe keys (useDedupeKey): the Nats-Msg-Id of each append is keyed by its run's. */
  private readonly dedupeKeys = new Map<string, Uint8Array>();

  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    private readonly opts: EventStoreOptions,
  ) {}

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
   * Keys the run's Nats-Msg-Ids with a per-run secret: `<dedupeId>~<HMAC-SHA256(key, dedupeId)>`.
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

  /** Appends one event and waits for JetStream's ack. Validates first (InvalidEventError). */
  async append(event: AkbeEvent, opts: { expectLastSubjectSeq?: number } = {}): Promise<AppendResult> {
    validateEvent(event);
    return this.publish(event, opts.expectLastSubjectSeq);
  }

  private async publish(event: AkbeEvent, expectLastSubjectSeq?: number): Promise<AppendResult> {
    const subject = eventSubject(event.meta.runId, event.type);
    // As appendMany: through a cluster's leader election, not past an API error.
    return retryElection(
      this.nc,
      `append ${event.meta.dedupeId}`,
      () => this.publishOnce(event, subject, expectLastSubjectSeq),
      {
        retryable: (err) => !(err instanceof ConcurrencyError) && isTransientNatsError(err),
      },
    );
  }

  private async publishOnce(
    event: AkbeEvent,
    subject: string,
    expectLastSubjectSeq?: number,
  ): Promise<AppendResult> {
    try {
      const ack = await this.js.publish(subject, encodeEvent(event), {
        msgID: this.msgIdOf(event),
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
    for (const e of events) validateEvent(e);
    const subjectOf = (i: number) => eventSubject(events[i].meta.runId, events[i].type);
    const publish = (indexes: readonly number[]) =>
      publishPipelined(
        this.nc,
        indexes.length,
        (k) => {
          const e = events[indexes[k]];
          return { subject: subjectOf(indexes[k]), data: encodeEvent(e), msgId: this.msgIdOf(e) };
        },
        { ...opts, expectStream: EVENTS_STREAM },
      ).then((rs) => rs.map((r) => ('kind' in r ? { ...r, index: indexes[r.index] } : r)));
    const outcomes = await publish(events.map((_, i) => i));
    // On a cluster, a node's loss leaves a stream without a leader for a few seconds (no
    // responders, or acks that time out): send what failed again until a new leader answers.
    // Nats-Msg-Id makes a second copy of an event that was stored after all a duplicate.
    if (this.nc.info?.cluster) {
      const deadline = Date.now() + ELECTION_RETRY_MS;
      let wait = 250;
      for (;;) {
        const again = outcomes.flatMap((o, i) =>
          'kind' in o && o.kind !== 'api' && !this.nc.isClosed() ? [i] : [],
        );
        if (again.length === 0 || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, 2_000);
        const retried = await publish(again);
        for (const [k, i] of again.entries()) outcomes[i] = retried[k];
      }
    }
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

  /**
   * A run's events in stream order, from `fromSeq`, ending at the last event present when the
   * replay began (or following new ones with `follow` until `signal` aborts). Each event carries
   * its stream sequence in `meta.seq`. Bad messages are dead-lettered, reported and skipped.
   */
  async *replay(runId: string, opts: StreamReadOptions = {}): AsyncGenerator<StoredEvent> {
    for await (const m of readStream(this.js, EVENTS_STREAM, runEventsFilter(runId), opts)) {
      const event = await this.decodeOrDeadLetter(m, 'replay');
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
      const event = await this.decodeOrDeadLetter(m, 'replay');
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

  /** Decodes a stream message; on failure stores its dead letter and returns null. */
  private async decodeOrDeadLetter(m: JsMsg, detectedBy: string): Promise<AkbeEvent | null> {
    try {
      const event = decodeStoredEvent(m.subject, m.data, this.opts.upcasters ?? UPCASTERS);
      event.meta.seq = m.seq;
      return event;
    } catch (err) {
      const reason: DeadLetterReason =
        err instanceof InvalidEventError
          ? 'invalid'
          : err instanceof UnsupportedEventVersionError
            ? 'unsupported-version'
            : 'undecodable';
      await this.deadLetter(m, reason, (err as Error).message, detectedBy);
      return null;
    }
  }

  private async deadLetter(
    m: JsMsg,
    reason: DeadLetterReason,
    detail: string,
    detectedBy: string,
  ): Promise<void> {
    const report = await deadLetterFromStream(this.js, m, reason, detail, detectedBy);
    (this.opts.onDeadLetter ?? defaultDeadLetterReporter)(report);
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
    const filter = runId ? runEventsFilter(runId) : EVENTS_SUBJECTS;
    try {
      await retryElection(this.nc, `create consumer ${durable}`, () =>
        this.jsm.consumers.add(EVENTS_STREAM, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          filter_subject: filter,
          ack_wait: nanos(30_000),
          max_ack_pending: 1024,
        }),
      );
    } catch (err) {
      throw new EventStoreError(
        `cannot create durable consumer ${durable} on ${filter}: ${(err as Error).message} (a consumer of that name with another filter exists? delete it)`,
        (err as JetStreamApiError).code,
        { cause: err },
      );
    }
    const consumer = await retryElection(this.nc, `consumer ${durable}`, () =>
      this.js.consumers.get(EVENTS_STREAM, durable),
    );
    const messages = await consumer.consume(consumeOptions(256));
    debugConsumer(`subscription ${durable}`, messages);
    const retries = opts.handlerRetries ?? 3;
    const onError =
      opts.onError ?? ((e: Error) => process.stderr.write(`akbe: consumer ${durable}: ${e.message}\n`));
    let processed = 0;
    const loop = async () => {
      for await (const m of messages) {
        try {
          const event = await this.decodeOrDeadLetter(m, `consumer:${durable}`);
          if (event) await this.handleWithRetries(m, event, handler, retries, durable);
          m.ack();
          processed++;
        } catch (err) {
          m.nak(1000);
          onError(err as Error);
        }
      }
    };
    let stopping = false;
    // The iterator throws when the connection closes under it (NATS lost): reported, and `done`
    // still settles quietly (nobody may be awaiting it: a rejection would crash the process).
    const done = loop().catch((err) => {
      if (!stopping) onError(err as Error);
    });
    const sub: EventSubscription = {
      durable,
      get processed() {
        return processed;
      },
      stop: async () => {
        stopping = true;
        await messages.close().catch(() => undefined);
        await done;
        this.subscriptions.delete(sub);
      },
      done,
      [Symbol.asyncDispose]: () => sub.stop(),
    };
    this.subscriptions.add(sub);
    return sub;
  }

  private async handleWithRetries(
    m: JsMsg,
    event: AkbeEvent,
    handler: (e: StoredEvent) => Promise<void> | void,
    retries: number,
    durable: string,
  ) {
    for (let attempt = 0; ; attempt++) {
      try {
        await handler({ seq: m.seq, subject: m.subject, event });
        return;
      } catch (err) {
        if (attempt >= retries) {
          await this.deadLetter(
            m,
            'handler-failed',
            `${(err as Error).name}: ${(err as Error).message}`,
            `consumer:${durable}`,
          );
          return;
        }
        m.working();
        await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
      }
    }
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
