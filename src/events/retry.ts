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
 * stalled event loop) can still miss an ack or a reply: a call that timed out is made again until
 * TIMEOUT_RETRY_MS have passed since its first try, and at least TIMEOUT_ATTEMPTS times in all
 * (every call retried here is idempotent: object-store puts of one name, KV puts, publishes with a
 * Nats-Msg-Id). The bound is time, not a count: on a starved machine four checkpoint uploads in a
 * row timed out within ~25 s and failed the run (session 13's grid), while the machine answered a
 * minute later. Any other error, and a closed connection (losing the only server is reported at
 * once, as src/cli reports a lost NATS server), is final.
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

/** On a single server: the fewest times in all a call that timed out is made (250, 500, 1000 ms apart). */
export const TIMEOUT_ATTEMPTS = 4;

/**
 * On a single server: how long after its first try a call that timed out is still made again.
 * Under JetStream's 2-minute dedupe window, so a publish retried with its Nats-Msg-Id is still
 * recognised as the same message.
 */
export const TIMEOUT_RETRY_MS = 90_000;

/** Overrides TIMEOUT_RETRY_MS (milliseconds, 0 to 110000: a try must start inside the dedupe window). */
export const TIMEOUT_RETRY_ENV = 'AKBE_TIMEOUT_RETRY_MS';

/** The single-server retry window: AKBE_TIMEOUT_RETRY_MS when set, else TIMEOUT_RETRY_MS. */
export function timeoutRetryMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[TIMEOUT_RETRY_ENV];
  if (raw === undefined || raw === '') return TIMEOUT_RETRY_MS;
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms < 0 || ms > 110_000)
    throw new Error(`${TIMEOUT_RETRY_ENV}=${raw}: expected whole milliseconds from 0 to 110000`);
  return ms;
}

/** A single server's call kept timing out for its window; the last timeout is the cause. */
export class RetriesExhaustedError extends Error {
  constructor(
    readonly what: string,
    readonly attempts: number,
    readonly waitedMs: number,
    opts?: ErrorOptions,
  ) {
    const cause = opts?.cause instanceof Error ? `${opts.cause.name}: ${opts.cause.message}` : 'no answer';
    super(`${what}: no answer in ${attempts} tries over ${Math.round(waitedMs / 1000)} s (${cause})`, opts);
    this.name = 'RetriesExhaustedError';
  }
}

/** The clock retryTimeouts reads and sleeps on (a test passes one that advances by hand). */
export interface RetryClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: RetryClock = { now: () => Date.now(), sleep: (ms) => delay(ms) };

/** What bounds retryTimeouts: the window after the first try, the fewest tries, the clock. */
export interface TimeoutRetryOptions {
  windowMs?: number;
  minAttempts?: number;
  clock?: RetryClock;
}

/**
 * Whether a call whose tries began at `startedMs` and have failed `attempt` times is tried again
 * after `waitMs`: always until `minAttempts`, then while the next try starts inside the window.
 */
export function timeoutRetryLeft(
  attempt: number,
  startedMs: number,
  nowMs: number,
  waitMs: number,
  opts: { windowMs?: number; minAttempts?: number } = {},
): boolean {
  if (attempt < (opts.minAttempts ?? TIMEOUT_ATTEMPTS)) return true;
  return nowMs - startedMs + waitMs <= (opts.windowMs ?? timeoutRetryMs());
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
  /** On a single server: what bounds retrying timeouts (default TIMEOUT_RETRY_MS, real time). */
  timeouts?: TimeoutRetryOptions;
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
  if (windowMs === 0) return retryTimeouts(nc, what, fn, opts.timeouts);
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
 * Calls `fn` until it succeeds, fails otherwise than by a timeout, the connection closes, or its
 * tries have timed out for the window (timeoutRetryLeft; then RetriesExhaustedError, the last
 * timeout its cause). Waits 250 ms, doubling to 4 s, between tries.
 */
export async function retryTimeouts<T>(
  nc: NatsConnection,
  what: string,
  fn: () => Promise<T>,
  opts: TimeoutRetryOptions = {},
): Promise<T> {
  const clock = opts.clock ?? realClock;
  const started = clock.now();
  for (let attempt = 1, wait = 250; ; attempt++, wait = Math.min(wait * 2, 4_000)) {
    try {
      return await fn();
    } catch (err) {
      if (!isTimeoutError(err) || nc.isClosed()) throw err;
      if (!timeoutRetryLeft(attempt, started, clock.now(), wait, opts))
        throw new RetriesExhaustedError(what, attempt, clock.now() - started, { cause: err });
      if (process.env.AKBE_DEBUG)
        process.stderr.write(`akbe debug: ${what}: try ${attempt} timed out; again in ${wait} ms\n`);
      await clock.sleep(wait);
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
