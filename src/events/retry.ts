/**
 * Retrying JetStream calls through a cluster's leader election.
 *
 * When a node of a JetStream cluster dies, every stream (and KV bucket, object store, durable
 * consumer) it led has no leader for a few seconds, and the clients it served reconnect to another
 * node. Meanwhile a JetStream request gets no answer (a timeout), no responders (nobody listens on
 * the API subject yet) or "temporarily unavailable". Each of those is worth asking again after a
 * short wait; any other answer (stream not found, wrong last sequence, permissions) is final.
 *
 *   const info = await retryElection(nc, 'stream info AKBE_EVENTS', () => jsm.streams.info(name));
 *
 * On a single server there is no election to wait for, but a busy machine (a slow fsync, a
 * stalled event loop) can still miss an ack or a reply: a call that timed out is made again, up to
 * TIMEOUT_ATTEMPTS times in all (every call retried here is idempotent: object-store puts of one
 * name, KV puts, publishes with a Nats-Msg-Id). Any other error, and a closed connection (losing
 * the only server is reported at once, as src/cli reports a lost NATS server), is final.
 * AKBE_DEBUG=1 logs each retry.
 */
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/** How long a call keeps trying through an election (well under JetStream's 2 min dedupe window). */
export const ELECTION_RETRY_MS = 30_000;

/** The JetStream cluster did not answer within the retry window. */
export class ClusterUnavailableError extends Error {
  constructor(
    readonly what: string,
    readonly waitedMs: number,
    opts?: ErrorOptions,
  ) {
    const cause = opts?.cause instanceof Error ? `${opts.cause.name}: ${opts.cause.message}` : 'no answer';
    super(
      `${what}: the JetStream cluster did not answer for ${Math.round(waitedMs / 1000)} s (${cause}); is a majority of its nodes up?`,
      opts,
    );
    this.name = 'ClusterUnavailableError';
  }
}

/** On a single server: how many times in all a call that timed out is made (250, 500, 1000 ms apart). */
export const TIMEOUT_ATTEMPTS = 4;

/** A single server's call timed out TIMEOUT_ATTEMPTS times; the last timeout is the cause. */
export class RetriesExhaustedError extends Error {
  constructor(
    readonly what: string,
    readonly attempts: number,
    opts?: ErrorOptions,
  ) {
    const cause = opts?.cause instanceof Error ? `${opts.cause.name}: ${opts.cause.message}` : 'no answer';
    super(`${what}: no answer in ${attempts} tries (${cause})`, opts);
    this.name = 'RetriesExhaustedError';
  }
}

/** True for a timeout (no ack, no reply in time) anywhere in the cause chain. */
export function isTimeoutError(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause)
    if (e.name === 'TimeoutError' || /\btime(d ?)?out\b/i.test(e.message)) return true;
  return false;
}

/** API error codes that mean "ask again soon": no cluster quorum or leader yet, stream offline. */
const TRANSIENT_API_CODES = new Set([10008, 10118]);

/** True for the errors a leader election (or a reconnect) produces, anywhere in the cause chain. */
export function isTransientNatsError(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    if (/^(TimeoutError|NoResponders|NoRespondersError|JetStreamNotEnabled)$/.test(e.name)) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && (TRANSIENT_API_CODES.has(code) || code === 503)) return true;
    if (/temporarily unavailable|no responders|timeout|stream is offline/i.test(e.message)) return true;
  }
  return false;
}

export interface RetryOptions {
  /** Total time to keep trying (default ELECTION_RETRY_MS on a cluster, 0 on a single server). */
  windowMs?: number;
  /** Which errors to retry (default isTransientNatsError). */
  retryable?: (err: unknown) => boolean;
}

/** What a JetStream call goes through: the connection, or a JetStream client or manager on it. */
export type NatsApi = NatsConnection | JetStreamClient | JetStreamManager;

/** The connection under a JetStream client or manager (nats.js keeps it as `nc` on both). */
export function connectionOf(api: NatsApi): NatsConnection {
  const nc = 'isClosed' in api ? api : (api as unknown as { nc?: NatsConnection }).nc;
  if (!nc || typeof nc.isClosed !== 'function')
    throw new Error('no NATS connection under this JetStream API');
  return nc;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The retry window for a connection: ELECTION_RETRY_MS when its server is part of a cluster. */
export function electionWindowMs(nc: NatsConnection): number {
  return nc.info?.cluster ? ELECTION_RETRY_MS : 0;
}

/**
 * Calls `fn` until it succeeds, fails with a non-transient error, the connection closes, or the
 * window ends (then ClusterUnavailableError, with the last error as its cause). Waits 250 ms,
 * doubling to 2 s, between tries. With no window (a single server), retryTimeouts.
 */
export async function retryElection<T>(
  api: NatsApi,
  what: string,
  fn: () => Promise<T>,
  opts: RetryOptions = {},
): Promise<T> {
  const nc = connectionOf(api);
  const started = Date.now();
  const windowMs = opts.windowMs ?? electionWindowMs(nc);
  if (windowMs === 0) return retryTimeouts(nc, what, fn);
  const retryable = opts.retryable ?? isTransientNatsError;
  for (let wait = 250, attempt = 1; ; wait = Math.min(wait * 2, 2_000), attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!retryable(err) || nc.isClosed()) throw err;
      const waited = Date.now() - started;
      if (waited + wait > windowMs) throw new ClusterUnavailableError(what, waited, { cause: err });
      if (process.env.AKBE_DEBUG)
        process.stderr.write(
          `akbe debug: ${what}: try ${attempt} failed (${(err as Error).message}); again in ${wait} ms\n`,
        );
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/**
 * Calls `fn` until it succeeds, fails otherwise than by a timeout, the connection closes, or it
 * timed out `attempts` times (then RetriesExhaustedError, the last timeout its cause).
 */
export async function retryTimeouts<T>(
  nc: NatsConnection,
  what: string,
  fn: () => Promise<T>,
  attempts = TIMEOUT_ATTEMPTS,
): Promise<T> {
  for (let attempt = 1, wait = 250; ; attempt++, wait *= 2) {
    try {
      return await fn();
    } catch (err) {
      if (!isTimeoutError(err) || nc.isClosed()) throw err;
      if (attempt >= attempts) throw new RetriesExhaustedError(what, attempts, { cause: err });
      if (process.env.AKBE_DEBUG)
        process.stderr.write(`akbe debug: ${what}: try ${attempt} timed out; again in ${wait} ms\n`);
      await delay(wait);
    }
  }
}

type Listener = () => void;
const reconnectListeners = new WeakMap<NatsConnection, Set<Listener>>();

/** Calls `fn` after every reconnect of `nc` until the returned function is called. */
export function onReconnect(nc: NatsConnection, fn: Listener): () => void {
  let listeners = reconnectListeners.get(nc);
  if (!listeners) {
    const set = new Set<Listener>();
    listeners = set;
    reconnectListeners.set(nc, set);
    // One status loop per connection, whatever the number of requests; it ends with the connection.
    void (async () => {
      for await (const s of nc.status()) if (s.type === 'reconnect') for (const l of [...set]) l();
    })().catch(() => undefined);
  }
  listeners.add(fn);
  return () => listeners.delete(fn);
}
