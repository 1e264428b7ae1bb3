/**
 * A durable consumer of the events stream for a live projection (EventStore.subscribe): in order,
 * one message at a time, a failing handler retried in process and then dead-lettered.
 */
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AkbeEvent } from './catalog.js';
import { consumeOptions, debugConsumer } from './consume.js';
import { EventStoreError } from './errors.js';
import { retryElection } from './retry.js';
import type { StoredEvent, StoredMessages } from './stored-messages.js';
import { nanos } from './streams.js';
import { EVENTS_STREAM, EVENTS_SUBJECTS, runEventsFilter } from './subjects.js';

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

/** What a subscription needs of the store; it adds itself to `subscriptions` and leaves on stop. */
export interface SubscriptionHost {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly messages: StoredMessages;
  readonly subscriptions: Set<EventSubscription>;
}

/** EventStore.subscribe (its comment says what it delivers and how a failing handler ends). */
export async function subscribe(
  host: SubscriptionHost,
  durable: string,
  runId: string | undefined,
  handler: (e: StoredEvent) => Promise<void> | void,
  opts: SubscribeOptions = {},
): Promise<EventSubscription> {
  const filter = runId ? runEventsFilter(runId) : EVENTS_SUBJECTS;
  try {
    await retryElection(host.nc, `create consumer ${durable}`, () =>
      host.jsm.consumers.add(EVENTS_STREAM, {
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
  const consumer = await retryElection(host.nc, `consumer ${durable}`, () =>
    host.js.consumers.get(EVENTS_STREAM, durable),
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
        const event = await host.messages.decodeOrDeadLetter(m, `consumer:${durable}`);
        if (event) await handleWithRetries(host, m, event, handler, retries, durable);
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
      host.subscriptions.delete(sub);
    },
    done,
    [Symbol.asyncDispose]: () => sub.stop(),
  };
  host.subscriptions.add(sub);
  return sub;
}

async function handleWithRetries(
  host: SubscriptionHost,
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
        await host.messages.deadLetter(
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
