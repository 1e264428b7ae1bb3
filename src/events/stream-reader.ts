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
  const lastSeq = (await (await js.jetstreamManager()).streams.info(stream)).state.last_seq;
  const consumer = await js.consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: Math.max(1, opts.fromSeq ?? 1),
  });
  try {
    const pendingAtStart = (await consumer.info(true)).num_pending;
    if (!opts.follow && (pendingAtStart === 0 || lastSeq < (opts.fromSeq ?? 1))) return;
    const messages = await consumer.consume({ max_messages: opts.batch ?? 512 });
    const stop = () => void messages.close().catch(() => undefined);
    opts.signal?.addEventListener('abort', stop, { once: true });
    try {
      for await (const m of messages) {
        if (!opts.follow && m.seq > lastSeq) break;
        yield m;
        if (!opts.follow && (m.seq >= lastSeq || m.info.pending === 0)) break;
      }
    } finally {
      opts.signal?.removeEventListener('abort', stop);
      await messages.close().catch(() => undefined);
    }
  } finally {
    // Ordered consumers expire on their own after 5 minutes; delete now to keep `nats status` tidy.
    await consumer.delete().catch(() => undefined);
  }
}
