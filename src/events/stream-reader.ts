/**
 * Ordered reads of one filter subject of a JetStream stream, as an AsyncIterable of messages.
 *
 * Bounded (default): ends at the last matching message present when the read began. The
 * stream's last sequence is read first; the read stops at the first message past it, or when a
 * message says no matching message is pending. (Counting down the consumer's initial
 * `num_pending` is not enough: nats-server 2.9 has been seen to report one too few for a
 * filtered consumer started mid-stream after a restart, which dropped the last event.) Messages
 * appended during the read are not included, so a replay is a snapshot and always terminates.
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
  const jsm = await js.jetstreamManager();
  const lastSeq = (await retryElection(js, `stream info ${stream}`, () => jsm.streams.info(stream))).state
    .last_seq;
  let next = Math.max(1, opts.fromSeq ?? 1);
  if (!opts.follow && lastSeq < next) return;
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
      const pendingAtStart = (
        await retryElection(js, `read ${stream} ${filter}: consumer info`, () => consumer.info(true))
      ).num_pending;
      if (!opts.follow && pendingAtStart === 0) return;
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
          if (!opts.follow && m.seq > lastSeq) return;
          next = m.seq + 1;
          yield m;
          if (!opts.follow && (m.seq >= lastSeq || m.info.pending === 0)) return;
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
