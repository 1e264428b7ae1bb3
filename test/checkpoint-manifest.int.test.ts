/**
 * Issues 22 item 2 and 23 item 5 (checkpoint manifest): integrity once covered model.safetensors
 * only, so a replaced config.json (another activation or epsilon) or a 7-byte
 * optimizer.safetensors loaded under the recorded sha256. policy.published v2 records the
 * manifest of every file of the checkpoint; every load checks each file against it. Real
 * nats-server, real object store, real safetensors bytes, the real recordedInLog and resume fold.
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
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
import { manifestDigest } from '../src/events/train-digest.js';
import { encodeSafetensors } from '../src/gpu/safetensors.js';
import { withNats } from './helpers/nats.js';

const sha = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex');
const CONFIG = {
  model_type: 'gpt2',
  n_positions: 16,
  activation_function: 'gelu_new',
  layer_norm_epsilon: 1e-5,
};
const FORGED_CONFIG = JSON.stringify({ ...CONFIG, activation_function: 'relu', layer_norm_epsilon: 0.5 });

/** A small but real checkpoint: config, weights, AdamW state (and the base's tokenizer file). */
function writeCheckpoint(dir: string, fill: number) {
  mkdirSync(dir, { recursive: true });
  const model = encodeSafetensors([['w', { shape: [4, 8], data: new Float32Array(32).fill(fill) }]]);
  const optimizer = encodeSafetensors([['m.w', { shape: [4, 8], data: new Float32Array(32).fill(0.125) }]], {
    format: 'akbe-adamw',
    step: '3',
  });
  const config = JSON.stringify(CONFIG);
  writeFileSync(join(dir, 'model.safetensors'), model);
  writeFileSync(join(dir, 'optimizer.safetensors'), optimizer);
  writeFileSync(join(dir, 'config.json'), config);
  return { model, optimizer, config };
}

async function setup(t: Test) {
  const nats = await withNats(t);
  const home = mkdtempSync(join(tmpdir(), 'akbe-manifest-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const trainer = await CheckpointStore.open(nats.nc, 'r1', join(home, 'run'));
  writeCheckpoint(join(home, 'base'), 0.25);
  writeFileSync(join(home, 'base', 'tokenizer.json'), '{"model":{"vocab":{}}}');
  const base = await trainer.importBase(join(home, 'base'));
  const files = writeCheckpoint(trainer.versionDir(1), 0.5);
  const published = await trainer.publish(1);
  const store = await EventStore.open(nats.nc);
  await store.appendMany([
    // v0's sha256 and manifest, as openRun records them in run.started.config.
    createEvent(
      'run.started',
      {
        algo: 'grpo',
        config: { basePolicySha256: base.sha256, basePolicyManifest: base.manifest },
        seeds: { run: 1 },
        worldRef: 'test',
        policyRef: 'base',
        akbeVersion: 'test',
      },
      { runId: 'r1', step: 0, policyVersion: 0 },
    ),
    createEvent('policy.published', { version: 1, ...published }, { runId: 'r1', step: 0, policyVersion: 1 }),
  ]);
  // The attacker: a process holding the trainer role's key (it may write the object store).
  const obj = await new Objm(await nats.connectAs('trainer')).open(CHECKPOINT_BUCKET);
  /** A worker on another machine: nothing local, what to expect read from the log. */
  const worker = async (name: string, log?: (l: string) => void) =>
    CheckpointStore.open(nats.nc, 'r1', join(home, name), { recorded: recordedInLog(store, 'r1'), log });
  /** A resumed orchestrator over the run dir: what to expect from the log's fold. */
  const resumed = async (log: (l: string) => void) => {
    const s = await CheckpointStore.open(nats.nc, 'r1', join(home, 'run'), { log });
    const { state } = await foldRun(store, 'r1', resumePoint);
    for (const [v, sha256] of state.publishedSha) s.expect(v, sha256, state.publishedManifest.get(v));
    return s;
  };
  return { nats, home, trainer, files, published, base, store, obj, worker, resumed };
}

t.test('publish records every file of the checkpoint and the manifest digest', async (t) => {
  const { published, files, trainer } = await setup(t);
  t.same(Object.keys(published.manifest).sort(), [
    'config.json',
    'model.safetensors',
    'optimizer.safetensors',
    'tokenizer.json',
  ]);
  t.equal(published.manifest['config.json'], sha(files.config));
  t.equal(published.manifest['optimizer.safetensors'], sha(files.optimizer));
  t.equal(published.manifest['model.safetensors'], published.sha256);
  t.equal(published.manifestSha256, manifestDigest(published.manifest));
  t.equal(
    published.manifest['tokenizer.json'],
    sha(readFileSync(join(trainer.versionDir(1), 'tokenizer.json'))),
  );
});

t.test('(d) an untouched checkpoint loads, on a worker and on resume, without a word', async (t) => {
  const { worker, resumed, published } = await setup(t);
  const lines: string[] = [];
  const w = await worker('worker', (l) => lines.push(l));
  const dir = await w.local(1);
  t.same(readdirSync(dir).sort(), Object.keys(published.manifest).sort(), 'every file, nothing else');
  const r = await resumed((l) => lines.push(l));
  t.equal(await r.local(1), r.versionDir(1));
  t.same(lines, []);
});

const refusal = (file: string) =>
  new RegExp(
    `^run r1: policy version 1 in object store akbe_checkpoints does not match the manifest the log recorded: .*${file.replace('.', '\\.')}.*; refusing to load it$`,
  );

t.test('(a) a replaced config.json (activation, epsilon) is refused naming config.json', async (t) => {
  const { obj, worker, resumed, published, trainer } = await setup(t);
  // Stored copy replaced: a worker refuses it and writes nothing.
  await obj.putBlob({ name: 'r1/v1/config.json' }, new TextEncoder().encode(FORGED_CONFIG));
  const w = await worker('worker');
  const err = await w.local(1).catch((e) => e);
  t.ok(err instanceof CheckpointIntegrityError, `refused: ${err}`);
  t.match(err.message, refusal('config.json'));
  t.match(
    err.message,
    `config.json has sha256 ${sha(FORGED_CONFIG).slice(0, 12)}…, the manifest of v1 records ${published.manifest['config.json'].slice(0, 12)}…`,
  );
  t.same(err.problems.length, 1, 'only config.json is wrong (model.safetensors is intact)');
  t.notOk(existsSync(w.versionDir(1)), 'nothing of it is written');

  // Local copy replaced as well (resume): the local copy is damaged, the stored one refused.
  writeFileSync(join(trainer.versionDir(1), 'config.json'), FORGED_CONFIG);
  const lines: string[] = [];
  const r = await resumed((l) => lines.push(l));
  await t.rejects(r.local(1), { name: 'CheckpointIntegrityError', message: refusal('config.json') });
  t.match(lines, [
    /^checkpoint v1 at .* is damaged \(config\.json has sha256 [0-9a-f]{12}…, the manifest of v1 records/,
  ]);
});

t.test("v0 too: a replaced config.json of the base is refused against run.started's manifest", async (t) => {
  const { obj, worker, base } = await setup(t);
  t.same(Object.keys(base.manifest).sort(), [
    'config.json',
    'model.safetensors',
    'optimizer.safetensors',
    'tokenizer.json',
  ]);
  t.ok(await (await worker('intact')).local(0), 'the untouched base loads');
  await obj.putBlob({ name: 'r1/v0/config.json' }, new TextEncoder().encode(FORGED_CONFIG));
  const err = await (await worker('worker')).local(0).catch((e) => e);
  t.ok(err instanceof CheckpointIntegrityError, `refused: ${err}`);
  t.match(
    err.message,
    /policy version 0 .*config\.json has sha256 [0-9a-f]{12}…, the manifest of v0 records/,
  );
});

t.test('(b) a 7-byte optimizer.safetensors is refused naming it', async (t) => {
  const { obj, worker, resumed, published, trainer, files } = await setup(t);
  const seven = new Uint8Array([1, 2, 3, 4, 5, 6, 7]);
  await obj.putBlob({ name: 'r1/v1/optimizer.safetensors' }, seven);
  const err = await (await worker('worker')).local(1).catch((e) => e);
  t.match(err.message, refusal('optimizer.safetensors'));
  t.match(
    err.message,
    `optimizer.safetensors has sha256 ${sha(seven).slice(0, 12)}…, the manifest of v1 records ${published.manifest['optimizer.safetensors'].slice(0, 12)}…`,
  );
  // The local copy cut to 7 bytes, the stored one intact again: the stored copy replaces it.
  await obj.putBlob({ name: 'r1/v1/optimizer.safetensors' }, files.optimizer);
  writeFileSync(join(trainer.versionDir(1), 'optimizer.safetensors'), seven);
  const lines: string[] = [];
  const r = await resumed((l) => lines.push(l));
  await r.local(1);
  t.match(lines, [
    /is damaged \(optimizer\.safetensors has sha256 [0-9a-f]{12}…, the manifest of v1 records/,
  ]);
  t.same(new Uint8Array(readFileSync(join(r.versionDir(1), 'optimizer.safetensors'))), files.optimizer);
});

t.test('(c) an extra file, or a missing one, is refused naming it', async (t) => {
  const { obj, worker, resumed, trainer, published } = await setup(t);
  // An extra file planted next to an intact checkpoint: the local copy is refused and rebuilt.
  writeFileSync(join(trainer.versionDir(1), 'modeling_evil.py'), 'import os');
  const lines: string[] = [];
  const r = await resumed((l) => lines.push(l));
  await r.local(1);
  t.match(lines, [
    /is damaged \(modeling_evil\.py \(sha256 [0-9a-f]{12}…\) is not in the manifest policy\.published recorded for v1\)/,
  ]);
  t.same(
    readdirSync(r.versionDir(1)).sort(),
    Object.keys(published.manifest).sort(),
    'the planted file is gone',
  );

  // A stored file deleted: refused naming it.
  await obj.delete('r1/v1/optimizer.safetensors');
  await t.rejects((await worker('worker')).local(1), {
    name: 'CheckpointIntegrityError',
    message: /optimizer\.safetensors is missing \(the manifest of v1 records sha256 [0-9a-f]{12}…\)/,
  });
});

t.test('an old log (policy.published without a manifest) checks the weights only, and says so', async (t) => {
  const { nats, home, published, obj } = await setup(t);
  const store = await EventStore.open(nats.nc);
  const { manifest: _m, manifestSha256: _d, ...v1Fields } = published;
  await store.appendMany([
    createEvent(
      'policy.published',
      { version: 1, ...v1Fields, manifest: null, manifestSha256: null },
      { runId: 'r2', step: 0, policyVersion: 1 },
    ),
  ]);
  for (const f of ['config.json', 'model.safetensors', 'optimizer.safetensors'])
    await obj.putBlob({ name: `r2/v1/${f}` }, await obj.getBlob(`r1/v1/${f}`).then((b) => b!));
  const lines: string[] = [];
  const w = await CheckpointStore.open(nats.nc, 'r2', join(home, 'old'), {
    recorded: recordedInLog(store, 'r2'),
    log: (l) => lines.push(l),
  });
  await w.local(1);
  t.match(lines, [
    /^checkpoint v1: manifest check not supported by this log .*checking model\.safetensors only$/,
  ]);
  // Its weights are still checked.
  await obj.putBlob({ name: 'r2/v1/model.safetensors' }, new Uint8Array(40));
  const w2 = await CheckpointStore.open(nats.nc, 'r2', join(home, 'old2'), {
    recorded: recordedInLog(store, 'r2'),
  });
  await t.rejects(w2.local(1), {
    name: 'CheckpointIntegrityError',
    message: /has sha256 [0-9a-f]{16}…, not the/,
  });
});

t.test(
  'a manifest naming a path outside the version directory is refused before anything is fetched',
  async (t) => {
    const { nats, home, published } = await setup(t);
    const w = await CheckpointStore.open(nats.nc, 'r1', join(home, 'worker'));
    w.expect(1, published.sha256, { ...published.manifest, '../../escape.txt': 'ab'.repeat(32) });
    await t.rejects(w.local(1), {
      name: 'CheckpointIntegrityError',
      message: /the manifest names "\.\.\/\.\.\/escape\.txt", not a plain file name/,
    });
    t.notOk(existsSync(join(home, 'escape.txt')));
    t.notOk(existsSync(w.versionDir(1)));
  },
);
