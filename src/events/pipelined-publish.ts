/**
 * Pipelined JetStream publishes: what other clients call "async publish". Each message is a core
 * publish with its own reply subject under one inbox subscription; JetStream answers every
 * message with an ack (or an error) on that reply subject. Up to `window` messages are
 * unacknowledged at a time. Compared with awaiting `js.publish()` per message (one request, one
 * timer, one round trip each), the client keeps the connection full and pays no round trip per
 * event; the server stores one connection's messages in the order they arrive.
 *
 * Every message gets exactly one outcome: an ack ({ seq, duplicate }), a JetStream error, "no
 * stream" (503 no responders), or a timeout when no ack arrived for `ackTimeoutMs` after the
 * last progress. Nothing is left pending when the promise settles.
 */
import { createInbox, headers, type Msg, type NatsConnection } from '@nats-io/transport-node';

export interface PipelinedMessage {
  subject: string;
  data: Uint8Array;
  msgId: string;
}

export interface PipelinedAck {
  seq: number;
  duplicate: boolean;
}

/** Why one message was not stored. */
export interface PipelinedFailure {
  index: number;
  kind: 'api' | 'no-stream' | 'timeout' | 'closed';
  code?: number;
  message: string;
}

export interface PipelinedOptions {
  window?: number;
  /** Fail the still-unacked messages when no ack arrived for this long (default 10 s). */
  ackTimeoutMs?: number;
  /** `Nats-Expected-Stream`: the server refuses a message another stream would store. */
  expectStream?: string;
}

interface JsAckBody {
  stream?: string;
  seq?: number;
  duplicate?: boolean;
  error?: { code: number; err_code?: number; description: string };
}

/**
 * Publishes `count` messages in order and resolves with one entry per message: an ack, or a failure.
 * After the first failure no further message is sent (they are reported as not sent, kind
 * 'closed'), so that a broken stream is not flooded.
 */
export async function publishPipelined(
  nc: NatsConnection,
  count: number,
  /** Builds message i when it is about to be sent: encoding overlaps with the server's work. */
  message: (index: number) => PipelinedMessage,
  opts: PipelinedOptions = {},
): Promise<Array<PipelinedAck | PipelinedFailure>> {
  const window = Math.max(1, opts.window ?? 256);
  const ackTimeoutMs = opts.ackTimeoutMs ?? 10_000;
  const results: Array<PipelinedAck | PipelinedFailure | undefined> = new Array(count);
  const inbox = createInbox();
  let inFlight = 0;
  let failed = false;
  let lastProgress = Date.now();
  let wake: (() => void) | null = null;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  const sub = nc.subscribe(`${inbox}.*`, {
    callback: (_err, msg: Msg) => {
      const index = Number(msg.subject.slice(inbox.length + 1));
      if (!Number.isInteger(index) || results[index] !== undefined) return;
      results[index] = parseAck(index, msg);
      if ('kind' in results[index]!) failed = true;
      inFlight--;
      lastProgress = Date.now();
      notify();
    },
  });
  const watchdog = setInterval(
    () => {
      if (inFlight > 0 && Date.now() - lastProgress > ackTimeoutMs) notify();
    },
    Math.min(1000, ackTimeoutMs),
  );

  const waitForSlot = (limit: number) =>
    new Promise<boolean>((resolve) => {
      const check = () => {
        if (inFlight <= limit) return resolve(true);
        if (Date.now() - lastProgress > ackTimeoutMs || nc.isClosed()) return resolve(false);
        wake = check;
      };
      check();
    });

  let sent = 0;
  try {
    for (; sent < count && !failed; sent++) {
      if (inFlight >= window && !(await waitForSlot(window - 1))) break;
      const m = message(sent);
      const h = headers();
      h.set('Nats-Msg-Id', m.msgId);
      if (opts.expectStream) h.set('Nats-Expected-Stream', opts.expectStream);
      nc.publish(m.subject, m.data, { headers: h, reply: `${inbox}.${sent}` });
      inFlight++;
    }
    // Flush so that a slow ack is not waiting on our own write buffer.
    await nc.flush().catch(() => undefined);
    await waitForSlot(0);
  } finally {
    clearInterval(watchdog);
    sub.unsubscribe();
  }
  for (let i = 0; i < count; i++) {
    if (results[i] !== undefined) continue;
    results[i] =
      i < sent
        ? {
            index: i,
            kind: nc.isClosed() ? 'closed' : 'timeout',
            message: `no ack from JetStream within ${ackTimeoutMs} ms`,
          }
        : { index: i, kind: 'closed', message: 'not sent: an earlier message of the batch failed' };
  }
  return results as Array<PipelinedAck | PipelinedFailure>;
}

const utf8 = new TextDecoder();

function parseAck(index: number, msg: Msg): PipelinedAck | PipelinedFailure {
  if (msg.headers?.code === 503) {
    return {
      index,
      kind: 'no-stream',
      code: 503,
      message: `no JetStream stream stores this subject (no responders)`,
    };
  }
  let body: JsAckBody;
  try {
    body = JSON.parse(utf8.decode(msg.data)) as JsAckBody;
  } catch {
    return {
      index,
      kind: 'api',
      message: `unreadable JetStream ack: ${utf8.decode(msg.data).slice(0, 80)}`,
    };
  }
  if (body.error)
    return {
      index,
      kind: 'api',
      code: body.error.err_code ?? body.error.code,
      message: body.error.description,
    };
  if (typeof body.seq !== 'number')
    return { index, kind: 'api', message: 'JetStream ack without a sequence' };
  return { seq: body.seq, duplicate: body.duplicate === true };
}
