/**
 * The request/reply envelope of akbe's NATS services (svc.generate, svc.train) and of rollout
 * commands: msgpack (typed arrays kept as such, `moreTypes`), a reply is `{ ok: true, value }` or
 * `{ ok: false, error: { name, message } }`. A service never crashes on a bad request: it answers
 * with the error, and the caller re-throws it as a ServiceCallError naming the subject.
 */
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { Packr } from 'msgpackr';
import { type ResendOptions, requestResending } from './resend-request.js';

const packr = new Packr({ useRecords: false, moreTypes: true });

export function pack(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function unpack<T>(bytes: Uint8Array): T {
  return packr.unpack(bytes) as T;
}

export type Reply<T> = { ok: true; value: T } | { ok: false; error: { name: string; message: string } };

/** The service answered with an error, or its reply could not be read. */
export class ServiceCallError extends Error {
  constructor(
    readonly subject: string,
    readonly remoteName: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`${subject}: ${remoteName}: ${message}`, opts);
    this.name = 'ServiceCallError';
  }
}

/** Answers `msg` with the handler's value or its error (never throws). */
export async function answer<T>(msg: Msg, handler: () => Promise<T>): Promise<void> {
  let reply: Reply<T>;
  try {
    reply = { ok: true, value: await handler() };
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    reply = { ok: false, error: { name: e.name, message: e.message } };
  }
  try {
    msg.respond(pack(reply));
  } catch {
    // The requester is gone (timeout, connection closed): nothing to answer.
  }
}

/** Answers `msg` with an error reply (a request refused at the edge). */
export function respondError(msg: Msg, err: Error): void {
  const reply: Reply<never> = { ok: false, error: { name: err.name, message: err.message } };
  if (!msg.respond(pack(reply))) throw new Error('no reply subject');
}

/**
 * Sends a request (again after a reconnect: resend-request.ts) and returns the value of an ok
 * reply; throws ServiceCallError otherwise. `opts.waitForResponderMs`: how long "no responders" is
 * asked again on a single server too (a service process that may still be starting);
 * `opts.signal` ends the call.
 */
export async function call<T>(
  nc: NatsConnection,
  subject: string,
  request: unknown,
  timeoutMs: number,
  opts: ResendOptions = {},
): Promise<T> {
  let msg: Msg;
  try {
    msg = await requestResending(nc, subject, pack(request), timeoutMs, opts);
  } catch (err) {
    throw new ServiceCallError(subject, (err as Error).name, (err as Error).message, { cause: err });
  }
  let reply: Reply<T>;
  try {
    reply = unpack<Reply<T>>(msg.data);
  } catch (err) {
    throw new ServiceCallError(subject, 'UndecodableReply', (err as Error).message, { cause: err });
  }
  if (!isReply(reply))
    throw new ServiceCallError(
      subject,
      'UndecodableReply',
      'the reply is not an {ok, value | error} envelope',
    );
  if (!reply.ok) throw new ServiceCallError(subject, reply.error.name, reply.error.message);
  return reply.value;
}

/** A reply from another process: checked before it is trusted (a bad one is an error, not a crash). */
function isReply(r: unknown): r is Reply<unknown> {
  if (typeof r !== 'object' || r === null) return false;
  const x = r as { ok?: unknown; error?: { name?: unknown; message?: unknown } };
  if (x.ok === true) return 'value' in x;
  return (
    x.ok === false &&
    typeof x.error === 'object' &&
    x.error !== null &&
    typeof x.error.name === 'string' &&
    typeof x.error.message === 'string'
  );
}
