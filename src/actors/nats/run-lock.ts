/**
 * One orchestrator per run. Two orchestrators driving one run fork its log (each appends its own
 * step facts, dispatches its own rollouts, purges the other's commands on resume), so
 * `runTraining` holds the run's lock from before it touches anything of the run until it ends.
 *
 * The lock is the key `<run>.lock` in the KV bucket `akbe_runs` (beside `<run>.policy`,
 * `<run>.status`, `<run>.dedupe-key`; a run id has no dots, so no other run's key can be it). Its
 * value is JSON naming the holder (RunLockRecord), rewritten by a heartbeat.
 *
 * - Acquire: `kv.create` (atomic: fails when the key exists). When it exists, the holder is read:
 *   a live holder refuses us (RunLockedError); a dead one is taken over with `kv.update` at the
 *   revision read (a compare-and-set: of two orchestrators taking over at once, one wins and the
 *   other is refused). Dead means: on this host with a pid that no longer exists (ESRCH), or a
 *   heartbeat older than STALE_AFTER_HEARTBEATS of the holder's intervals (another host, or a
 *   frozen process).
 * - Heartbeat: `kv.update` at our last revision every `heartbeatMs`. A refused update means the
 *   lock was taken over: `signal` aborts with RunLockLostError and the run stops writing.
 * - Release: `kv.delete` at our last revision, so a lock taken over is never deleted by the loser.
 *
 * Heartbeat ages compare the holder's clock with the reader's: hosts' clocks must agree to well
 * under the stale age (15 s by default).
 */
import { hostname } from 'node:os';
import { JetStreamApiError } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { retryElection } from '../../events/retry.js';
import { openRunsBucket, RUNS_BUCKET } from './runs-bucket.js';

/** How often a holder rewrites its heartbeat (ms). */
export const LOCK_HEARTBEAT_MS = 5_000;
/** A holder whose heartbeat is older than this many of its intervals is taken for dead. */
export const STALE_AFTER_HEARTBEATS = 3;

/** The lock's value: who holds the run, since when, and when it last said it is alive. */
export interface RunLockRecord {
  /** `${host}:${pid}`: what the messages name. */
  owner: string;
  host: string;
  pid: number;
  /** ISO times, from the holder's clock. */
  startedAt: string;
  heartbeatAt: string;
  /** The holder's heartbeat interval: how stale counts is the holder's, not the reader's, setting. */
  heartbeatMs: number;
}

export function runLockKey(runId: string): string {
  return `${runId}.lock`;
}

function seconds(ms: number): string {
  return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
}

/** Another orchestrator, alive, holds the run. */
export class RunLockedError extends Error {
  constructor(
    readonly runId: string,
    readonly holder: RunLockRecord,
    /** How long ago the holder's last heartbeat was, by our clock. */
    readonly heartbeatAgeMs: number,
  ) {
    super(
      `run ${runId} is already being run by the orchestrator ${holder.owner} (last heartbeat ${seconds(heartbeatAgeMs)} ago); wait for it to finish, or stop that process (pid ${holder.pid} on ${holder.host}) and start again`,
    );
    this.name = 'RunLockedError';
  }
}

/** Our lock was taken over while we held it: this orchestrator must stop writing to the run. */
export class RunLockLostError extends Error {
  constructor(
    readonly runId: string,
    /** Who holds it now, when that could be read. */
    readonly holder: RunLockRecord | null,
  ) {
    super(
      `run ${runId}: this orchestrator lost the run's lock to ${holder ? `the orchestrator ${holder.owner}` : 'another orchestrator'}; stopped without writing more to the run's log`,
    );
    this.name = 'RunLockLostError';
  }
}

/** What a reader makes of a holder: alive, or why it is taken for dead. */
export type HolderState = { alive: true } | { alive: false; why: string };

/**
 * Is the holder alive? Pure: the time, the reader's host and the pid probe come in.
 * Stale first: a frozen process on this host still has its pid, and only its heartbeat tells.
 */
export function holderState(
  held: RunLockRecord,
  at: { now: number; host: string; pidAlive: (pid: number) => boolean },
): HolderState {
  const age = at.now - Date.parse(held.heartbeatAt);
  const staleMs = STALE_AFTER_HEARTBEATS * held.heartbeatMs;
  if (!(age <= staleMs))
    return { alive: false, why: `its last heartbeat was ${seconds(age)} ago, over ${seconds(staleMs)}` };
  if (held.host === at.host && !at.pidAlive(held.pid))
    return { alive: false, why: `pid ${held.pid} no longer exists on ${held.host}` };
  return { alive: true };
}

/** Signal 0 probes a pid: ESRCH means no such process; EPERM means one exists (another user's). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** The record stored under the key, or null when it is no record (then it is taken over). */
export function parseLockRecord(text: string): RunLockRecord | null {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return null;
  }
  const { owner, host, pid, startedAt, heartbeatAt, heartbeatMs } = v ?? {};
  // pid > 0: process.kill(0 or a negative pid) would signal a whole process group.
  const ok =
    typeof owner === 'string' &&
    typeof host === 'string' &&
    Number.isInteger(pid) &&
    (pid as number) > 0 &&
    typeof startedAt === 'string' &&
    typeof heartbeatAt === 'string' &&
    Number.isFinite(Date.parse(heartbeatAt)) &&
    typeof heartbeatMs === 'number' &&
    heartbeatMs > 0;
  return ok ? (v as unknown as RunLockRecord) : null;
}

/** JetStream's wrong-last-sequence: a compare-and-set lost to another writer. */
function isCasConflict(err: unknown): boolean {
  return err instanceof JetStreamApiError && (err.code === 10071 || err.code === 10164);
}

export interface RunLockOptions {
  /** Heartbeat interval in ms (default LOCK_HEARTBEAT_MS; tests use a short one). */
  heartbeatMs?: number;
  /** Where messages about taking over, losing and releasing go (the run's log). */
  log?: (line: string) => void;
  /** Injected for tests: the clock, this host's name, this process's pid, the pid probe. */
  now?: () => number;
  host?: string;
  pid?: number;
  pidAlive?: (pid: number) => boolean;
}

/** A held run lock: heartbeats until released or lost. */
export class RunLock implements AsyncDisposable {
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setInterval> | null = null;
  private beating: Promise<void> | null = null;
  private released = false;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    readonly runId: string,
    private record: RunLockRecord,
    /** The key's revision we last wrote: every later write of ours is conditional on it. */
    private revision: number,
    private readonly o: Required<Pick<RunLockOptions, 'log' | 'now'>>,
  ) {
    this.timer = setInterval(() => this.tick(), record.heartbeatMs);
    this.timer.unref(); // a lock never keeps the process alive
  }

  /** Aborts (reason: RunLockLostError) when another orchestrator took the lock over. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get holder(): RunLockRecord {
    return this.record;
  }

  /** Takes the run's lock, or throws RunLockedError naming the live holder. */
  static async acquire(nc: NatsConnection, runId: string, opts: RunLockOptions = {}): Promise<RunLock> {
    const kv = await openRunsBucket(nc);
    const now = opts.now ?? Date.now;
    const log = opts.log ?? (() => undefined);
    const host = opts.host ?? hostname();
    const pid = opts.pid ?? process.pid;
    const key = runLockKey(runId);
    const mine = (): RunLockRecord => {
      const at = new Date(now()).toISOString();
      const heartbeatMs = opts.heartbeatMs ?? LOCK_HEARTBEAT_MS;
      return { owner: `${host}:${pid}`, host, pid, startedAt: at, heartbeatAt: at, heartbeatMs };
    };
    const held = (r: RunLockRecord, rev: number) => new RunLock(nc, kv, runId, r, rev, { log, now });
    const get = () => retryElection(nc, `KV get ${key}`, () => kv.get(key));
    const refused = (e: KvEntry | null) => {
      const r = e?.operation === 'PUT' ? parseLockRecord(e.string()) : null;
      return r ? new RunLockedError(runId, r, now() - Date.parse(r.heartbeatAt)) : null;
    };
    // A few rounds: a lock released between our create and our read is free again.
    for (let round = 0; round < 3; round++) {
      const record = mine();
      const value = JSON.stringify(record);
      try {
        return held(record, await retryElection(nc, `KV create ${key}`, () => kv.create(key, value)));
      } catch (err) {
        if (!isCasConflict(err)) throw err;
      }
      const entry = await get();
      if (entry?.operation !== 'PUT') continue;
      // A create retried through an election whose first try was stored: ours.
      if (entry.string() === value) return held(record, entry.revision);
      const current = parseLockRecord(entry.string());
      if (current) {
        const state = holderState(current, { now: now(), host, pidAlive: opts.pidAlive ?? pidAlive });
        if (state.alive) throw new RunLockedError(runId, current, now() - Date.parse(current.heartbeatAt));
        log(`run lock: taking run ${runId} over from ${current.owner}: ${state.why}`);
      } else log(`run lock: taking run ${runId} over: its lock held no readable record`);
      try {
        const rev = await retryElection(nc, `KV update ${key}`, () => kv.update(key, value, entry.revision));
        return held(record, rev);
      } catch (err) {
        if (!isCasConflict(err)) throw err;
        // Another orchestrator took it over between our read and our update: it is live.
        const after = await get();
        if (after?.operation === 'PUT' && after.string() === value) return held(record, after.revision);
        const winner = refused(after);
        if (winner) throw winner;
      }
    }
    throw new Error(`run ${runId}: its lock (KV ${RUNS_BUCKET} ${key}) kept changing hands; try again`);
  }

  /** One heartbeat at a time: a slow one is not overtaken by the next. */
  private tick(): void {
    if (this.beating || this.released || this.signal.aborted) return;
    // A closed connection never comes back: the run ends with its own message, not ours.
    if (this.nc.isClosed()) {
      this.stopHeartbeat();
      return;
    }
    this.beating = this.beat().finally(() => {
      this.beating = null;
    });
  }

  private async beat(): Promise<void> {
    const key = runLockKey(this.runId);
    const next = { ...this.record, heartbeatAt: new Date(this.o.now()).toISOString() };
    const value = JSON.stringify(next);
    try {
      this.revision = await retryElection(this.nc, `KV update ${key}`, () =>
        this.kv.update(key, value, this.revision),
      );
      this.record = next;
    } catch (err) {
      if (!isCasConflict(err)) {
        if (this.nc.isClosed()) {
          this.stopHeartbeat(); // gone for good (see tick)
          return;
        }
        // NATS unreachable for a moment: try again next interval (a long outage lets another
        // orchestrator take over, and then our next heartbeat is refused).
        this.o.log(`run lock: heartbeat of run ${this.runId} failed (${(err as Error).message}); retrying`);
        return;
      }
      const entry = await this.kv.get(key).catch(() => null);
      // An update retried through an election whose first try was stored: still ours.
      if (entry?.operation === 'PUT' && entry.string() === value) {
        this.revision = entry.revision;
        this.record = next;
        return;
      }
      const holder = entry?.operation === 'PUT' ? parseLockRecord(entry.string()) : null;
      this.stopHeartbeat();
      const lost = new RunLockLostError(this.runId, holder);
      this.o.log(`run lock: LOST: ${lost.message}`);
      this.controller.abort(lost);
    }
  }

  private stopHeartbeat(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Deletes the key if it is still ours (the delete is conditional on our last revision); true
   * when it was. Never throws: a release that fails must not hide why the run ended.
   */
  async release(): Promise<boolean> {
    if (this.released) return false;
    this.released = true;
    this.stopHeartbeat();
    await this.beating;
    if (this.signal.aborted) return false;
    try {
      const key = runLockKey(this.runId);
      await retryElection(this.nc, `KV delete ${key}`, () =>
        this.kv.delete(key, { previousSeq: this.revision }),
      );
      return true;
    } catch (err) {
      this.o.log(
        isCasConflict(err)
          ? `run lock: not released: run ${this.runId}'s lock is no longer ours`
          : `run lock: releasing run ${this.runId}'s lock failed (${(err as Error).message})`,
      );
      return false;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
