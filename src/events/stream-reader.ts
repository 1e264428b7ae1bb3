/**
 * Ordered reads of one filter subject of a JetStream stream, as an AsyncIterable of messages.
 *
 * Bounded (default): ends at the last matching message present when the read began. That
 * message's sequence is asked of the stream first (a message get by last subject, which takes
 * wildcards), and the read stops there. Pending counts are never trusted to end a read:
 * nats-server 2.9.10 reports a filtered consumer's `num_pending` (and each message's
 * `info.pending`) one too few or several too many after a restart (measured: 103 or 107-116 for
 * 104 messages), which dropped the last event or would wait forever for messages that do not
 * exist. Messages appended during the read are not included, so a replay is a snapshot and
 * always terminates.
 *
 * Follow: keeps delivering new messages until `signal` aborts (used by `akbe events tail`).
 *
 * nats-server 2.9 takes one filter subject per consumer: `filter` is a single string.
 */
import { DeliverPolicy, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';
import { consumeOptions, debugConsumer } from './consume.js';
import { connectionOf, onReconnect, retryElection } from './retry.js';

export interface StreamReadOptions {
  /** First stream sequence to read (default 1). */
  fromSeq?: number;
  /** Keep reading new messages until `signal` aborts. */
  follow?: boolean;
  signal?: AbortSignal;
  /** Messages per pull request. */
  batch?: number;
}

export async function* readStream(
  js: JetStreamClient,
  stream: string,
  filter: string,
  opts: StreamReadOptions = {},
): AsyncGenerator<JsMsg> {
  if (opts.signal?.aborted) return;
  let next = Math.max(1, opts.fromSeq ?? 1);
  const lastSeq = opts.follow ? Infinity : await lastMatchingSeq(js, stream, filter);
  if (lastSeq < next) return;
  for (;;) {
    const consumer = await retryElection(js, `read ${stream} ${filter}`, () =>
      js.consumers.get(stream, {
        filter_subjects: filter,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: next,
      }),
    );
    let lost = false;
    try {
      const messages = await consumer.consume(consumeOptions(opts.batch ?? 512));
      debugConsumer(`read ${stream} ${filter}`, messages);
      const stop = () => void messages.close().catch(() => undefined);
      // The consumer lived on one node (ordered consumers have one replica): after a reconnect or
      // missed heartbeats it may have died with that node, and nats.js would ask for its info
      // forever. Read on from a new consumer instead.
      const restart = () => {
        lost = true;
        stop();
      };
      const stopWatching = onReconnect(connectionOf(js), restart);
      void (async () => {
        for await (const s of messages.status()) if (s.type === 'heartbeats_missed') restart();
      })().catch(() => undefined);
      // An abort that came while the consumer was being set up has already fired its event.
      if (opts.signal?.aborted) stop();
      else opts.signal?.addEventListener('abort', stop, { once: true });
      try {
        for await (const m of messages) {
          if (m.seq > lastSeq) return;
          next = m.seq + 1;
          yield m;
          if (m.seq >= lastSeq) return;
        }
      } finally {
        stopWatching();
        opts.signal?.removeEventListener('abort', stop);
        await messages.close().catch(() => undefined);
      }
    } finally {
      // Ordered consumers expire on their own after 5 minutes; delete now to keep `nats status`
      // tidy (not awaited when lost: its node may be gone, and the request would time out).
      if (lost) void consumer.delete().catch(() => undefined);
      else await consumer.delete().catch(() => undefined);
    }
    if (!lost || opts.signal?.aborted) return;
    if (process.env.AKBE_DEBUG)
      process.stderr.write(
        `akbe debug: read ${stream} ${filter}: consumer lost, reading on from seq ${next}\n`,
      );
  }
}

/** The sequence of the newest message of `stream` matching `filter` (wildcards allowed), 0 if none. */
export async function lastMatchingSeq(js: JetStreamClient, stream: string, filter: string): Promise<number> {
  const jsm = await js.jetstreamManager();
  const last = await retryElection(js, `last message of ${stream} ${filter}`, () =>
    jsm.streams.getMessage(stream, { last_by_subj: filter }),
  );
  return last?.seq ?? 0;
}
