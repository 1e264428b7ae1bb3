/**
 * Issue 11 item 8 (checkpoint integrity): a checkpoint fetched from the object store is checked
 * against the sha256 the log recorded (policy.published, run.started's basePolicySha256 for v0);
 * a copy replaced in the object store (as a process holding the trainer's key can) is refused with
 * one line naming the version, and nothing of it is written; a truncated local copy falls back to
 * the intact stored copy and says so. keepCheckpoints prunes old versions (never v0, the newest
 * or the one before it). Real nats-server, real object store, real safetensors bytes.
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Objm } from '@nats-io/obj';
import t, { type Test } from 'tap';
import { CheckpointIntegrityError } from '../src/actors/checkpoints/checkpoint-files.js';
import { recordedInLog } from '../src/actors/checkpoints/checkpoint-records.js';
import { CheckpointStore } from '../src/actors/checkpoints/checkpoints.js';
import { createEvent } from '../src/events/catalog.js';
import { foldRun } from '../src/events/projection.js';
import { resumePoint } from '../src/events/projections/resume-point.js';
import { EventStore } from '../src/events/store.js';
import { CHECKPOINT_BUCKET } from '../src/events/subjects.js';
import { encodeSafetensors } from '../src/gpu/safetensors.js';
import { withNats } from './helpers/nats.js';

/** A small but real checkpoint directory: config.json and a one-tensor model.safetensors. */
function writeCheckpoint(dir: string, fill: number): Uint8Array {
  mkdirSync(dir, { recursive: true });
  const model = encodeSafetensors([['w', { shape: [4, 8], data: new Float32Array(32).fill(fill) }]]);
  writeFileSync(join(dir, 'model.safetensors'), model);
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'gpt2', n_positions: 16 }));
  return model;
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

async function setup(t: Test) {
  const nats = await withNats(t);
  const home = mkdtempSync(join(tmpdir(), 'akbe-ckpt-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const lines: string[] = [];
  const trainer = await CheckpointStore.open(nats.nc, 'r1', join(home, 'run'), { log: (l) => lines.push(l) });
  const v1 = writeCheckpoint(trainer.versionDir(1), 0.5);
  const published = await trainer.publish(1);
  return { nats, home, trainer, v1, published, lines };
}

t.test('a stored copy replaced in the object store is refused, naming the version', async (t) => {
  const { nats, home, v1, published } = await setup(t);
  t.equal(published.sha256, sha(v1), 'publish returns the sha256 of the weights it uploaded');
  // A process with the trainer role's key rewrites the stored weights (permissions allow it).
  const forged = encodeSafetensors([['w', { shape: [4, 8], data: new Float32Array(32).fill(9) }]]);
  const obj = await new Objm(await nats.connectAs('trainer')).open(CHECKPOINT_BUCKET);
  await obj.putBlob({ name: 'r1/v1/model.safetensors' }, forged);

  // A worker on another machine: nothing local, the expected sha256 comes from the log.
  const worker = await CheckpointStore.open(nats.nc, 'r1', join(home, 'worker'));
  worker.expect(1, published.sha256);
  const err = await worker.local(1).catch((e) => e);
  t.ok(err instanceof CheckpointIntegrityError, `refused: ${err}`);
  t.equal(err.version, 1);
  t.equal(err.actual, sha(forged));
  t.equal(err.expected, sha(v1));
  t.match(
    err.message,
    /^run r1: policy version 1 in object store akbe_checkpoints has sha256 [0-9a-f]{16}…, not the [0-9a-f]{16}… the log recorded; refusing to load it$/,
  );
  t.notOk(err.message.includes('\n'), 'one line');
  t.notOk(existsSync(worker.versionDir(1)), 'nothing of it is written');

  // The intact bytes put back: the same worker loads them.
  await obj.putBlob({ name: 'r1/v1/model.safetensors' }, v1);
  const dir = await worker.local(1);
  t.equal(sha(readFileSync(join(dir, 'model.safetensors'))), sha(v1));
});

t.test('the expected sha256 is read from the log: policy.published, and run.started for v0', async (t) => {
  const { nats, home, trainer, published } = await setup(t);
  const base = writeCheckpoint(join(home, 'base'), 0.25);
  const v0 = await trainer.importBase(join(home, 'base'));
  const store = await EventStore.open(nats.nc);
  await store.appendMany([
    createEvent(
      'run.started',
      {
        algo: 'grpo',
        config: { basePolicySha256: v0.sha256 },
        seeds: { run: 0 },
        worldRef: 'w',
        policyRef: 'p',
        akbeVersion: 'test',
      },
      { runId: 'r1', step: 0, policyVersion: 0 },
    ),
    createEvent('policy.published', { version: 1, ...published }, { runId: 'r1', step: 0, policyVersion: 1 }),
  ]);
  const lookup = recordedInLog(store, 'r1', { waitMs: 300 });
  // This run.started records no basePolicyManifest (an older log): v0 is checked by its weights.
  t.same(await lookup(0), { sha256: sha(base), manifest: null });
  t.same(await lookup(1), { sha256: published.sha256, manifest: published.manifest });
  const missing: string[] = [];
  t.equal(await recordedInLog(store, 'r1', { waitMs: 300, log: (l) => missing.push(l) })(7), undefined);
  t.match(missing, [/no policy\.published for v7 in the log/]);
  // A resumed orchestrator's fold collects the same.
  const { state } = await foldRun(store, 'r1', resumePoint);
  t.same([...state.publishedSha], [[1, published.sha256]]);

  // A worker with the log lookup refuses a forged v0 (the base) as it does any version.
  const obj = await new Objm(nats.nc).open(CHECKPOINT_BUCKET);
  await obj.putBlob(
    { name: 'r1/v0/model.safetensors' },
    encodeSafetensors([['w', { shape: [1], data: new Float32Array([1]) }]]),
  );
  const worker = await CheckpointStore.open(nats.nc, 'r1', join(home, 'worker'), { recorded: lookup });
  await t.rejects(worker.local(0), { name: 'CheckpointIntegrityError', version: 0 });
  t.equal(sha(readFileSync(join(await worker.local(1), 'model.safetensors'))), published.sha256);
});

t.test('a truncated local checkpoint falls back to the intact stored copy and says so', async (t) => {
  const { nats, home, trainer, v1, published, lines } = await setup(t);
  const file = join(trainer.versionDir(1), 'model.safetensors');
  // In the process that wrote it, the copy is known good and not hashed again.
  t.equal(await trainer.local(1), trainer.versionDir(1));

  // The next process (a resume) finds it cut short by a crash or a full disk.
  truncateSync(file, v1.byteLength - 40);
  const resumed = await CheckpointStore.open(nats.nc, 'r1', join(home, 'run'), { log: (l) => lines.push(l) });
  resumed.expect(1, published.sha256);
  t.equal(await resumed.local(1), resumed.versionDir(1));
  t.equal(sha(readFileSync(file)), sha(v1), 'the local copy is the intact stored one again');
  t.match(lines, [
    /^checkpoint v1 at .*v1 is damaged \(model\.safetensors has sha256 [0-9a-f]{16}…, the log recorded [0-9a-f]{16}…\); using the stored copy from object store akbe_checkpoints$/,
  ]);

  // With no recorded sha256 (an older log), a truncated file is caught by its format.
  truncateSync(file, 20);
  const older = await CheckpointStore.open(nats.nc, 'r1', join(home, 'run'), { log: (l) => lines.push(l) });
  await older.local(1);
  t.equal(sha(readFileSync(file)), sha(v1));
  t.match(
    lines[1],
    /^checkpoint v1 at .* is damaged \(.*model\.safetensors: .*truncated.*\); using the stored copy/,
  );
  t.equal(lines.length, 2, 'an intact local copy is used without a word');
  t.equal(
    readdirSync(trainer.versionDir(1)).filter((f) => f.endsWith('.tmp')).length,
    0,
    'no temporary files left',
  );
});

t.test(
  'a truncated AdamW state (no sha256 is recorded for it) falls back to the stored copy too',
  async (t) => {
    const { nats, home, trainer, published, lines } = await setup(t);
    const optimizer = encodeSafetensors(
      [['m.w', { shape: [4, 8], data: new Float32Array(32).fill(0.125) }]],
      {
        step: '3',
      },
    );
    writeCheckpoint(trainer.versionDir(2), 2);
    writeFileSync(join(trainer.versionDir(2), 'optimizer.safetensors'), optimizer);
    const v2 = await trainer.publish(2);
    const file = join(trainer.versionDir(2), 'optimizer.safetensors');
    truncateSync(file, optimizer.byteLength - 4);
    const resumed = await CheckpointStore.open(nats.nc, 'r1', join(home, 'run'), {
      log: (l) => lines.push(l),
    });
    resumed.expect(1, published.sha256);
    resumed.expect(2, v2.sha256);
    await resumed.local(2);
    t.same(new Uint8Array(readFileSync(file)), optimizer, 'the whole AdamW state is back');
    t.match(lines, [
      new RegExp(
        `^checkpoint v2 at .*v2 is damaged \\(optimizer\\.safetensors is ${optimizer.byteLength - 4} bytes, its header says ${optimizer.byteLength}\\); using the stored copy`,
      ),
    ]);
    await resumed.local(1);
    t.equal(lines.length, 1, 'v1 (no AdamW state, weights intact) is used as it is');
  },
);

t.test(
  'keepCheckpoints: versions past the newest N go from disk and the object store, never v0',
  async (t) => {
    const { nats, home, trainer } = await setup(t);
    writeCheckpoint(join(home, 'base'), 0.25);
    await trainer.importBase(join(home, 'base'));
    for (let v = 2; v <= 5; v++) {
      writeCheckpoint(trainer.versionDir(v), v);
      await trainer.publish(v);
    }
    const obj = await new Objm(nats.nc).open(CHECKPOINT_BUCKET);
    const stored = async () =>
      [...new Set((await obj.list()).map((i) => i.name.split('/')[1]))].sort(
        (a, b) => Number(a.slice(1)) - Number(b.slice(1)),
      );
    const local = () =>
      readdirSync(join(home, 'run')).sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
    t.same(local(), ['v0', 'v1', 'v2', 'v3', 'v4', 'v5']);

    t.same(await trainer.prune(5, 0), [], 'keepCheckpoints 0 keeps every version');
    t.same(await trainer.prune(5, 2), [1, 2, 3]);
    t.same(local(), ['v0', 'v4', 'v5'], 'the newest and the one before it (in use by a lagging worker) stay');
    t.same(await stored(), ['v0', 'v4', 'v5']);
    t.same(await trainer.prune(5, 2), [], 'nothing twice');

    writeCheckpoint(trainer.versionDir(6), 6);
    await trainer.publish(6);
    t.same(await trainer.prune(6, 2), [4]);
    t.same(local(), ['v0', 'v5', 'v6']);
    t.same(await stored(), ['v0', 'v5', 'v6']);

    // A resumed process finds what an earlier one left (a crash before its prune) and removes it.
    writeCheckpoint(trainer.versionDir(3), 3);
    const resumed = await CheckpointStore.open(nats.nc, 'r1', join(home, 'run'));
    t.same(await resumed.prune(6, 3), [3]);
    t.same(local(), ['v0', 'v5', 'v6']);
    // The kept versions still load from the object store elsewhere.
    const worker = await CheckpointStore.open(nats.nc, 'r1', join(home, 'worker'));
    t.ok(existsSync(join(await worker.local(5), 'model.safetensors')));
    await t.rejects(worker.local(4), { name: 'CheckpointMissingError' });
    // A damaged local copy of a pruned version: the error says both.
    writeCheckpoint(worker.versionDir(4), 4);
    truncateSync(join(worker.versionDir(4), 'model.safetensors'), 30);
    await t.rejects(worker.local(4), {
      name: 'CheckpointMissingError',
      message:
        /^run r1: no intact checkpoint of policy version 4 on disk or in object store akbe_checkpoints \(the local copy is damaged: .*model\.safetensors: .*\)$/,
    });

    await t.rejects(
      trainer.prune(6, 1),
      /config\.keepCheckpoints must be 0 \(keep every version\) or an integer >= 2/,
    );
  },
);

t.test("a worker's cache keeps the run's newest versions as it fetches and publishes new ones", async (t) => {
  const { nats, home, trainer } = await setup(t);
  writeCheckpoint(join(home, 'base'), 0.25);
  await trainer.importBase(join(home, 'base'));
  for (let v = 2; v <= 4; v++) {
    writeCheckpoint(trainer.versionDir(v), v);
    await trainer.publish(v);
  }
  const cacheDir = join(home, 'cache');
  const cache = await CheckpointStore.open(nats.nc, 'r1', cacheDir, { cacheKeep: 2 });
  const cached = () => readdirSync(cacheDir).sort();
  await cache.local(0);
  await cache.local(1);
  await cache.local(2);
  t.same(cached(), ['v0', 'v1', 'v2'], 'v2 - 2 = v0: nothing to remove yet');
  await cache.local(3);
  t.same(cached(), ['v0', 'v2', 'v3']);
  await cache.local(4);
  t.same(cached(), ['v0', 'v3', 'v4']);
  // A trainer on a worker publishes from its cache: the same window.
  writeCheckpoint(cache.versionDir(5), 5);
  await cache.publish(5);
  t.same(cached(), ['v0', 'v4', 'v5']);
  // The object store is the orchestrator's to prune: the cache touched none of it.
  const obj = await new Objm(nats.nc).open(CHECKPOINT_BUCKET);
  t.equal(new Set((await obj.list()).map((i) => i.name.split('/')[1])).size, 6, 'v0..v5 still stored');
});
