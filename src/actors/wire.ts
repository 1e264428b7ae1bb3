/**
 * The request/reply envelope of akbe's NATS services (svc.generate, svc.train) and of rollout
 * commands: msgpack (typed arrays kept as such, `moreTypes`), a reply is `{ ok: true, value }` or
 * `{ ok: false, error: { name, message } }`. A service never crashes on a bad request: it answers
 * with the error, and the caller re-throws it as a ServiceCallError naming the subject.
 */
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { Packr } from 'msgpackr';

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

/** Sends a request and returns the value of an ok reply; throws ServiceCallError otherwise. */
export async function call<T>(
  nc: NatsConnection,
  subject: string,
  request: unknown,
  timeoutMs: number,
): Promise<T> {
  let msg: Msg;
  try {
    msg = await nc.request(subject, pack(request), { timeout: timeoutMs });
  } catch (err) {
    throw new ServiceCallError(subject, (err as Error).name, (err as Error).message, { cause: err });
  }
  let reply: Reply<T>;
  try {
    reply = unpack<Reply<T>>(msg.data);
  } catch (err) {
    throw new ServiceCallError(subject, 'UndecodableReply', (err as Error).message, { cause: err });
  }
  if (!reply.ok) throw new ServiceCallError(subject, reply.error.name, reply.error.message);
  return reply.value;
}
