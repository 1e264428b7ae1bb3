/**
 * Policy versions of a run: a checkpoint per version, and the current version.
 *
 * - On disk under the run dir, `<runDir>/checkpoints/v<k>/` (config.json, model.safetensors,
 *   optimizer.safetensors when there is one): what the trainer writes and resume reads.
 * - In the JetStream object store `akbe_checkpoints`, objects `<run>/v<k>/<file>`: so a policy or
 *   trainer worker on another machine (or a fresh run dir) gets version k from NATS alone.
 * - In the KV bucket `akbe_runs` (runs-bucket.ts), key `<run>.policy` holds the newest published
 *   version (and `<run>.status` the run's status), so `akbe worker` and a resumed orchestrator
 *   know where a run stands without reading the log. (`<run>.lock` there is the orchestrator's,
 *   run-lock.ts.)
 *
 * How many versions a run keeps, locally and in the object store: keep-checkpoints.ts.
 *
 * Version 0 is the run's base policy (`policyRef`), copied in at the start of the run.
 *
 * Integrity: the log records each version's sha256 (run.started's `basePolicySha256` for v0,
 * policy.published for the others). A copy fetched from the object store must match it or it is
 * refused (CheckpointIntegrityError): the object store can be written by the trainer role, the log's
 * policy.published only by the orchestrator. A local copy that does not match (or, with no recorded
 * sha256, does not parse: a truncated write) is replaced by the stored copy, and the log line says so.
 *
 * Manifest (policy.published v2): publish() hashes every file of the version directory (config,
 * tokenizer files, AdamW state, weights) and uploads them all; the manifest and its digest go into
 * policy.published. A load of a version whose log records a manifest checks every file against it
 * (checkpoint-integrity.ts): a missing file, an extra file or a file with another sha256 makes the
 * local copy damaged and the stored copy refused. Logs from before (manifest null) are checked on
 * their weights only, and say so once per version.
 */

import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ObjectStore } from '@nats-io/obj';
import { Objm, setSha256Backend } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { retryElection } from '../../events/retry.js';
import { defaultReplicas } from '../../events/streams.js';
import { CHECKPOINT_BUCKET } from '../../events/subjects.js';
import { type Manifest, manifestDigest, manifestOf } from '../../events/train-digest.js';
import { decodeSafetensors } from '../../gpu/safetensors.js';
import { faultPoint } from '../../util/kill-point.js';
import { openRunsBucket, RunEntries } from '../nats/runs-bucket.js';
import {
  CHECKPOINT_FILES,
  CheckpointIntegrityError,
  CheckpointMissingError,
  copyPresent,
  SAFE_FILE_NAME,
  TOKENIZER_FILES,
} from './checkpoint-files.js';
import {
  checkpointProblem,
  isTemporary,
  manifestProblems,
  noManifestNote,
  type RecordedCheckpoint,
  readCheckpointFiles,
  sha256Hex,
} from './checkpoint-integrity.js';
import { keepCheckpointsProblem } from './keep-checkpoints.js';

// Object store digests through node:crypto rather than the client's default pure-JS sha256 (a
// process-wide choice): a 1.2 MB upload took 49 ms with it, 19 ms without, on an idle server.
setSha256Backend('native');

/** Object store chunks of an upload: the client lowers it to the server's max_payload (1 MiB by default). */
const UPLOAD_CHUNK_BYTES = 8 * 1024 * 1024;

export interface CheckpointStoreOptions {
  /** Where a replaced local copy is reported. */
  log?: (line: string) => void;
  /**
   * The sha256 the log recorded for a version not registered with `expect` (a worker reads the
   * run's log); undefined when the log has none.
   */
  recorded?: (version: number) => Promise<string | RecordedCheckpoint | undefined>;
  /**
   * A worker's cache: keep only the newest N versions on disk (and v0), removed as newer ones are
   * fetched or published (keepCheckpoints; 0 or undefined keeps all). The orchestrator prunes the
   * run dir and the object store itself (`prune`).
   */
  cacheKeep?: number;
}

export interface PublishedCheckpoint {
  bucket: string;
  /** Object name of the model weights. */
  checkpoint: string;
  /** sha256 of model.safetensors, lowercase hex. */
  sha256: string;
  bytes: number;
  /** The digest of the train request that made this version, as the trainer computed it on receipt. */
  requestSha256?: string;
  /** sha256 of every file of the version directory (policy.published v2). */
  manifest: Manifest;
  /** manifestDigest(manifest). */
  manifestSha256: string;
}

export class CheckpointStore {
  /** What the log records of each version (or what this process wrote): weights' sha256, manifest. */
  private readonly expected = new Map<number, RecordedCheckpoint>();
  /** Versions whose missing manifest was said (once each). */
  private readonly noted = new Set<number>();
  /** Versions whose local copy was checked (or written) by this process. */
  private readonly verified = new Set<number>();
  /** prune(): every version from 1 to below this one is gone (1: nothing pruned by this process yet). */
  private prunedFrom = 1;

  private constructor(
    /** Every object store and KV call retries through a cluster's leader election (events/retry.ts). */
    private readonly nc: NatsConnection,
    readonly runId: string,
    /** Local directory of this run's versions (or a cache of them on a worker). */
    readonly dir: string,
    private readonly obj: ObjectStore,
    /** The run's entries in KV akbe_runs (current version, status, dedupe key). */
    private readonly entries: RunEntries,
    private readonly opts: CheckpointStoreOptions,
  ) {}

  static async open(
    nc: NatsConnection,
    runId: string,
    dir: string,
    opts: CheckpointStoreOptions = {},
  ): Promise<CheckpointStore> {
    // As many replicas as the event log (3 on a cluster): a run must survive losing one node.
    const replicas = defaultReplicas(nc);
    const obj = await retryElection(nc, `object store ${CHECKPOINT_BUCKET}`, () =>
      new Objm(nc).create(CHECKPOINT_BUCKET, { replicas }),
    );
    const entries = new RunEntries(nc, await openRunsBucket(nc), runId);
    await mkdir(dir, { recursive: true });
    return new CheckpointStore(nc, runId, dir, obj, entries, opts);
  }

  /**
   * Registers what the log recorded for `version`: its model.safetensors' sha256 and, from
   * policy.published v2, its manifest (null: a v1 policy.published, which recorded none).
   */
  expect(version: number, sha256: string, manifest?: Manifest | null): void {
    this.expected.set(version, { sha256, manifest });
  }

  private async recordedFor(version: number): Promise<RecordedCheckpoint | undefined> {
    const known = this.expected.get(version);
    if (known) return known;
    const found = await this.opts.recorded?.(version);
    const rec = typeof found === 'string' ? { sha256: found } : found;
    if (rec) this.expected.set(version, rec);
    return rec;
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
    if (version > 0) await copyPresent(this.versionDir(0), dir, TOKENIZER_FILES);
    // The files go up side by side, in chunks as large as the server takes: the object store
    // waits for an ack per chunk, and one file after another in 128 KiB chunks made the upload the
    // longest part of a tiny policy's training step (bench/async.ts, BENCHMARKS.md).
    // Every file of the directory (not a temporary one of a cut write, nor any other dotfile):
    // the manifest covers them all.
    const files = [...(await readCheckpointFiles(dir))].filter(
      ([file]) => !isTemporary(file) && SAFE_FILE_NAME.test(file),
    );
    const uploaded = await Promise.all(
      files.map(async ([file, bytes]) => {
        const name = this.objectName(version, file);
        const meta = { name, options: { max_chunk_size: UPLOAD_CHUNK_BYTES } };
        // A timed-out put is made again (retry.ts): a put of the same name replaces the object.
        await retryElection(this.nc, `store ${name}`, async () => {
          faultPoint('upload', version);
          return this.obj.putBlob(meta, bytes);
        });
        return { file, bytes };
      }),
    );
    const model = uploaded.find((u) => u.file === 'model.safetensors')?.bytes;
    if (!model) throw new CheckpointMissingError(this.runId, version);
    // Not the run's current version: the orchestrator sets that when it records the version
    // (run-steps.ts), so a trainer needs no KV write (issue 23: a KV write can roll the bucket up).
    const sha256 = sha256Hex(model);
    const manifest = manifestOf(new Map(files));
    // This process wrote (or checked) these bytes: later loads here need not hash them again.
    this.expected.set(version, { sha256, manifest });
    this.verified.add(version);
    await this.pruneCache(version);
    return {
      bucket: CHECKPOINT_BUCKET,
      checkpoint: this.objectName(version, 'model.safetensors'),
      sha256,
      bytes: model.byteLength,
      manifest,
      manifestSha256: manifestDigest(manifest),
    };
  }

  /** Copies a base policy directory in as version 0 and publishes it. */
  async importBase(baseDir: string): Promise<PublishedCheckpoint> {
    const dir = this.versionDir(0);
    await mkdir(dir, { recursive: true });
    await copyPresent(baseDir, dir, [...CHECKPOINT_FILES, ...TOKENIZER_FILES], true);
    if (!existsSync(join(dir, 'model.safetensors')))
      throw new Error(`${baseDir}: no model.safetensors; build a base policy with akbe pretrain`);
    const published = await this.publish(0);
    await this.setCurrentVersion(0);
    return published;
  }

  /**
   * A local directory holding `version`: the local copy when it is intact (its sha256 is the one
   * the log recorded, or with none recorded it parses), else the stored copy from the object
   * store, checked against the recorded sha256 before anything is written.
   */
  async local(version: number): Promise<string> {
    const dir = this.versionDir(version);
    const recorded = await this.recordedFor(version);
    const expected = recorded?.sha256;
    const manifest = recorded?.manifest ?? undefined;
    if (recorded?.manifest === null && !this.noted.has(version)) {
      this.noted.add(version);
      this.opts.log?.(noManifestNote(version));
    }
    let damage: string | undefined;
    if (existsSync(join(dir, 'model.safetensors')) && existsSync(join(dir, 'config.json'))) {
      if (this.verified.has(version)) return dir;
      damage = (await checkpointProblem(dir, version, recorded)) ?? undefined;
      if (!damage) {
        this.verified.add(version);
        return dir;
      }
      this.opts.log?.(
        `checkpoint v${version} at ${dir} is damaged (${damage}); using the stored copy from object store ${CHECKPOINT_BUCKET}`,
      );
    }
    // The manifest comes from the trainer's reply: a name that is not a plain file name (a path,
    // `..`) would write outside the version directory, so it is refused before anything is fetched.
    const unsafe = manifest ? Object.keys(manifest).filter((f) => !SAFE_FILE_NAME.test(f)) : [];
    if (unsafe.length)
      throw new CheckpointIntegrityError(
        this.runId,
        version,
        '',
        expected ?? '',
        unsafe.map((f) => `the manifest names ${JSON.stringify(f)}, not a plain file name`),
      );
    const files = new Map<string, Uint8Array>();
    // With a manifest, every file it names (tokenizer files and weight shards too); else the three.
    for (const file of manifest ? Object.keys(manifest).sort() : CHECKPOINT_FILES) {
      const name = this.objectName(version, file);
      // null: no such object (a missing optimizer state is fine); election errors are retried.
      const bytes = await retryElection(this.nc, `fetch ${name}`, () => this.obj.getBlob(name)).catch(
        () => null,
      );
      if (bytes) files.set(file, bytes);
      else if (file === 'model.safetensors' || (!manifest && file !== 'optimizer.safetensors'))
        throw new CheckpointMissingError(this.runId, version, damage);
    }
    const model = files.get('model.safetensors');
    if (!model) throw new CheckpointMissingError(this.runId, version, damage);
    const actual = sha256Hex(model);
    if (manifest) {
      const problems = manifestProblems(version, manifest, manifestOf(files));
      if (problems.length)
        throw new CheckpointIntegrityError(
          this.runId,
          version,
          actual,
          expected ?? manifest['model.safetensors'],
          problems,
        );
    }
    if (expected && actual !== expected)
      throw new CheckpointIntegrityError(this.runId, version, actual, expected);
    if (!expected) decodeSafetensors(model, this.objectName(version, 'model.safetensors'));
    await mkdir(dir, { recursive: true });
    // Each file whole or not at all (a crash mid-write must not leave a truncated copy that loads).
    for (const [file, bytes] of files) {
      const tmp = join(dir, `.${file}.${process.pid}.tmp`);
      await writeFile(tmp, bytes);
      await rename(tmp, join(dir, file));
    }
    // What the manifest does not name goes (a planted file, a cut write's leftover): the directory
    // is then exactly the recorded checkpoint.
    if (manifest)
      for (const file of await readdir(dir))
        if (!(file in manifest)) await rm(join(dir, file), { recursive: true, force: true });
    this.expected.set(version, { sha256: actual, manifest: recorded?.manifest });
    this.verified.add(version);
    await this.pruneCache(version);
    return dir;
  }

  /** Removes cached versions older than the newest `cacheKeep` (never v0), on disk only. */
  private async pruneCache(newest: number): Promise<void> {
    const keep = this.opts.cacheKeep ?? 0;
    if (keep === 0) return;
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      const v = /^v\d+$/.test(name) ? Number(name.slice(1)) : 0;
      if (v >= 1 && v <= newest - keep) {
        await rm(this.versionDir(v), { recursive: true, force: true });
        this.verified.delete(v);
      }
    }
  }

  /**
   * Removes the versions older than the newest `keep` (never v0), on disk and in the object store,
   * once `newest` is recorded in the log (call it then: the log's last version is what a resume
   * loads). Returns the versions removed. keep 0 removes nothing.
   */
  async prune(newest: number, keep: number): Promise<number[]> {
    const problem = keepCheckpointsProblem(keep);
    if (problem) throw new RangeError(problem);
    const last = newest - keep; // the newest version to remove
    if (keep === 0 || last < this.prunedFrom) return [];
    // The first prune of a process lists what is there (a resumed run left older versions);
    // later ones remove the versions that fell out of the window since.
    const candidates = new Set<number>();
    if (this.prunedFrom === 1) for (const v of await this.presentVersions()) candidates.add(v);
    else for (let v = this.prunedFrom; v <= last; v++) candidates.add(v);
    const removed = [...candidates].filter((v) => v >= 1 && v <= last).sort((a, b) => a - b);
    // Every object of a removed version (tokenizer files and shards too, since manifests).
    const stored = removed.length ? await this.storedNames() : [];
    for (const v of removed) {
      await rm(this.versionDir(v), { recursive: true, force: true });
      const prefix = `${this.runId}/v${v}/`;
      const names = new Set<string>([...CHECKPOINT_FILES, ...TOKENIZER_FILES]);
      for (const n of stored) if (n.startsWith(prefix)) names.add(n.slice(prefix.length));
      for (const file of names) {
        const name = this.objectName(v, file);
        // Through a leader election; a missing object (optimizer state) is fine.
        await retryElection(this.nc, `delete ${name}`, () => this.obj.delete(name)).catch(() => undefined);
      }
      this.verified.delete(v);
    }
    this.prunedFrom = last + 1;
    return removed;
  }

  /** Names of every object in the bucket. */
  private async storedNames(): Promise<string[]> {
    const infos = await retryElection(this.nc, `list ${CHECKPOINT_BUCKET}`, () => this.obj.list());
    return infos.map((i) => i.name);
  }

  /** The versions of this run on disk or in the object store. */
  private async presentVersions(): Promise<Set<number>> {
    const out = new Set<number>();
    const version = (name: string) => (/^v\d+$/.test(name) ? Number(name.slice(1)) : null);
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      const v = version(name);
      if (v !== null) out.add(v);
    }
    const prefix = `${this.runId}/`;
    for (const info of await retryElection(this.nc, `list ${CHECKPOINT_BUCKET}`, () => this.obj.list())) {
      if (!info.name.startsWith(prefix)) continue;
      const v = version(info.name.slice(prefix.length).split('/')[0]);
      if (v !== null) out.add(v);
    }
    return out;
  }

  /** The newest published version (KV `<run>.policy`, runs-bucket.ts), null before the first. */
  async currentVersion(): Promise<number | null> {
    return this.entries.currentVersion();
  }

  async setCurrentVersion(version: number): Promise<void> {
    await this.entries.setCurrentVersion(version);
  }

  /** The run's secret dedupe key (EventStore.useDedupeKey), made by the first process that asks. */
  async dedupeKey(): Promise<Uint8Array> {
    return this.entries.dedupeKey();
  }

  async setStatus(status: string): Promise<void> {
    await this.entries.setStatus(status);
  }

  async status(): Promise<string | null> {
    return this.entries.status();
  }
}
