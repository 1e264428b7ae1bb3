/**
 * Policy versions of a run: a checkpoint per version, and the current version.
 *
 * - On disk under the run dir, `<runDir>/checkpoints/v<k>/` (config.json, model.safetensors,
 *   optimizer.safetensors when there is one): what the trainer writes and resume reads.
 * - In the JetStream object store `akbe_checkpoints`, objects `<run>/v<k>/<file>`: so a policy or
 *   trainer worker on another machine (or a fresh run dir) gets version k from NATS alone.
 * - In the KV bucket `akbe_runs`, key `<run>.policy` holds the newest published version (and
 *   `<run>.status` the run's status), so `akbe worker` and a resumed orchestrator know where a
 *   run stands without reading the log.
 *
 * Version 0 is the run's base policy (`policyRef`), copied in at the start of the run.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { KV } from '@nats-io/kv';
import type { ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';

export const CHECKPOINT_BUCKET = 'akbe_checkpoints';
export const RUNS_BUCKET = 'akbe_runs';
const FILES = ['config.json', 'model.safetensors', 'optimizer.safetensors'] as const;

export class CheckpointMissingError extends Error {
  constructor(
    readonly runId: string,
    readonly version: number,
    opts?: ErrorOptions,
  ) {
    super(
      `run ${runId}: no checkpoint of policy version ${version} on disk or in object store ${CHECKPOINT_BUCKET}`,
      opts,
    );
    this.name = 'CheckpointMissingError';
  }
}

export interface PublishedCheckpoint {
  bucket: string;
  /** Object name of the model weights. */
  checkpoint: string;
  /** sha256 of model.safetensors, lowercase hex. */
  sha256: string;
  bytes: number;
}

export class CheckpointStore {
  private constructor(
    readonly runId: string,
    /** Local directory of this run's versions (or a cache of them on a worker). */
    readonly dir: string,
    private readonly obj: ObjectStore,
    private readonly kv: KV,
  ) {}

  static async open(nc: NatsConnection, runId: string, dir: string): Promise<CheckpointStore> {
    const { Objm } = await import('@nats-io/obj');
    const { Kvm } = await import('@nats-io/kv');
    const obj = await new Objm(nc).create(CHECKPOINT_BUCKET);
    const kv = await new Kvm(nc).create(RUNS_BUCKET);
    await mkdir(dir, { recursive: true });
    return new CheckpointStore(runId, dir, obj, kv);
  }

  versionDir(version: number): string {
    return join(this.dir, `v${version}`);
  }

  private objectName(version: number, file: string): string {
    return `${this.runId}/v${version}/${file}`;
  }

  /** Uploads the files of `versionDir(version)` and returns where the weights are. */
  async publish(version: number): Promise<PublishedCheckpoint> {
    const dir = this.versionDir(version);
    let model: Uint8Array | null = null;
    for (const file of FILES) {
      const path = join(dir, file);
      if (!existsSync(path)) continue;
      const bytes = new Uint8Array(await readFile(path));
      if (file === 'model.safetensors') model = bytes;
      await this.obj.putBlob({ name: this.objectName(version, file) }, bytes);
    }
    if (!model) throw new CheckpointMissingError(this.runId, version);
    await this.setCurrentVersion(version);
    return {
      bucket: CHECKPOINT_BUCKET,
      checkpoint: this.objectName(version, 'model.safetensors'),
      sha256: createHash('sha256').update(model).digest('hex'),
      bytes: model.byteLength,
    };
  }

  /** Copies a base policy directory in as version 0 and publishes it. */
  async importBase(baseDir: string): Promise<PublishedCheckpoint> {
    const dir = this.versionDir(0);
    await mkdir(dir, { recursive: true });
    for (const file of FILES) {
      if (existsSync(join(baseDir, file))) await copyFile(join(baseDir, file), join(dir, file));
    }
    if (!existsSync(join(dir, 'model.safetensors')))
      throw new Error(`${baseDir}: no model.safetensors; build a base policy with akbe pretrain`);
    return this.publish(0);
  }

  /** A local directory holding `version`, fetched from the object store when not on disk. */
  async local(version: number): Promise<string> {
    const dir = this.versionDir(version);
    if (existsSync(join(dir, 'model.safetensors')) && existsSync(join(dir, 'config.json'))) return dir;
    await mkdir(dir, { recursive: true });
    for (const file of FILES) {
      const bytes = await this.obj.getBlob(this.objectName(version, file)).catch(() => null);
      if (bytes) await writeFile(join(dir, file), bytes);
      else if (file !== 'optimizer.safetensors') throw new CheckpointMissingError(this.runId, version);
    }
    return dir;
  }

  async currentVersion(): Promise<number | null> {
    const e = await this.kv.get(`${this.runId}.policy`);
    if (!e || e.length === 0) return null;
    return Number(e.string());
  }

  async setCurrentVersion(version: number): Promise<void> {
    await this.kv.put(`${this.runId}.policy`, String(version));
  }

  async setStatus(status: string): Promise<void> {
    await this.kv.put(`${this.runId}.status`, status);
  }

  async status(): Promise<string | null> {
    const e = await this.kv.get(`${this.runId}.status`);
    return e && e.length > 0 ? e.string() : null;
  }
}
