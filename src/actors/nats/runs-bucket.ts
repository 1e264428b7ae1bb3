/**
 * The KV bucket `akbe_runs` of runs' state: `<run>.policy` holds the newest published version and
 * `<run>.status` the run's status, so `akbe worker` and a resumed orchestrator know where a run
 * stands without reading the log; `<run>.dedupe-key` is the run's dedupe key for processes without
 * credentials (events/message-key.ts; with credentials nothing is stored). (`<run>.lock` there is
 * the orchestrator's, run-lock.ts.) CheckpointStore reads and writes a run's entries.
 */
import { randomBytes } from 'node:crypto';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { delay, retryElection } from '../../events/retry.js';
import { defaultReplicas } from '../../events/streams.js';

export const RUNS_BUCKET = 'akbe_runs';

/** The KV bucket of runs' state (`<run>.policy`, `<run>.status`, `<run>.lock`...), created when missing. */
export function openRunsBucket(nc: NatsConnection): Promise<KV> {
  // As many replicas as the event log (3 on a cluster): a run must survive losing one node.
  const replicas = defaultReplicas(nc);
  return retryElection(nc, `KV ${RUNS_BUCKET}`, () => new Kvm(nc).create(RUNS_BUCKET, { replicas }));
}

/** One run's entries in the bucket. */
export class RunEntries {
  constructor(
    /** Every KV call retries through a cluster's leader election (events/retry.ts). */
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    readonly runId: string,
  ) {}

  async currentVersion(): Promise<number | null> {
    const e = await this.kvGet(`${this.runId}.policy`);
    if (!e || e.length === 0) return null;
    return Number(e.string());
  }

  async setCurrentVersion(version: number): Promise<void> {
    await this.kvPut(`${this.runId}.policy`, String(version));
  }

  /**
   * The run's dedupe key for processes without credentials (events/message-key.ts 'run-key'): 32
   * random bytes in KV `<run>.dedupe-key`, made by whichever process of the run asks first
   * (kv.create is atomic, so all agree on one). Any client of such a server can read it.
   */
  async dedupeKey(): Promise<Uint8Array> {
    const name = `${this.runId}.dedupe-key`;
    const existing = await this.kvGet(name);
    if (existing && existing.length > 0) return Buffer.from(existing.string(), 'base64');
    const key = randomBytes(32).toString('base64');
    try {
      await retryElection(this.nc, `KV create ${name}`, () => this.kv.create(name, key));
      // Ours: no read back (on a cluster the get may be answered by a replica that lacks it yet).
      return Buffer.from(key, 'base64');
    } catch {
      // another process of the run created it first: use theirs, once it reaches our replica
    }
    for (let tries = 0; tries < 50; tries++) {
      const e = await this.kvGet(name);
      if (e && e.length > 0) return Buffer.from(e.string(), 'base64');
      await delay(100);
    }
    throw new Error(`run ${this.runId}: no dedupe key in KV ${RUNS_BUCKET}`);
  }

  private kvGet(key: string) {
    return retryElection(this.nc, `KV get ${key}`, () => this.kv.get(key));
  }

  private kvPut(key: string, value: string) {
    return retryElection(this.nc, `KV put ${key}`, () => this.kv.put(key, value));
  }

  async setStatus(status: string): Promise<void> {
    await this.kvPut(`${this.runId}.status`, status);
  }

  async status(): Promise<string | null> {
    const e = await this.kvGet(`${this.runId}.status`);
    return e && e.length > 0 ? e.string() : null;
  }
}
