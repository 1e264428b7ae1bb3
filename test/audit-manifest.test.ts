/**
 * The audit's checkpoint-manifest check (src/audit/checkpoint-manifests.ts): the recorded
 * manifestSha256 is the digest of the recorded manifest and, with the run's checkpoint files on
 * disk, of those files. Real files; a v1 log (no manifest) gets a note.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { auditRun } from '../src/audit/audit.js';
import { checkManifests } from '../src/audit/checkpoint-manifests.js';
import { Collector } from '../src/audit/collector.js';
import { createEvent, type EventOf } from '../src/events/catalog.js';
import { manifestDigest, manifestOf, sha256Hex } from '../src/events/train-digest.js';
import { encodeSafetensors } from '../src/gpu/safetensors.js';

function setup(t: Test) {
  const home = mkdtempSync(join(tmpdir(), 'akbe-audit-manifest-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const dir = join(home, 'checkpoints', 'v1');
  mkdirSync(dir, { recursive: true });
  const files = {
    'config.json': new TextEncoder().encode('{"model_type":"gpt2","layer_norm_epsilon":1e-5}'),
    'model.safetensors': encodeSafetensors([['w', { shape: [2], data: new Float32Array([1, 2]) }]]),
    'optimizer.safetensors': encodeSafetensors([['m.w', { shape: [2], data: new Float32Array([0, 0]) }]]),
  };
  for (const [n, b] of Object.entries(files)) writeFileSync(join(dir, n), b);
  const manifest = manifestOf(files);
  const event = (data: Partial<EventOf<'policy.published'>['data']> = {}) => {
    const e = createEvent(
      'policy.published',
      {
        version: 1,
        bucket: 'akbe_checkpoints',
        checkpoint: 'r1/v1/model.safetensors',
        sha256: sha256Hex(files['model.safetensors']),
        bytes: files['model.safetensors'].byteLength,
        manifest,
        manifestSha256: manifestDigest(manifest),
        ...data,
      },
      { runId: 'r1', step: 0, policyVersion: 1 },
    );
    e.meta.seq = 7;
    return e;
  };
  return { home, dir, event, checkpointsDir: join(home, 'checkpoints') };
}

t.test('intact files on disk: no mismatch', async (t) => {
  const { event, checkpointsDir } = setup(t);
  const c = new Collector();
  checkManifests(c, new Map([[1, event()]]), checkpointsDir);
  t.same(c.mismatches, []);
  t.same([...c.notes], []);
});

t.test('a replaced config.json or an extra file on disk is a mismatch at policy.published', async (t) => {
  const { event, checkpointsDir, dir } = setup(t);
  writeFileSync(join(dir, 'config.json'), '{"model_type":"gpt2","layer_norm_epsilon":0.5}');
  const c = new Collector();
  checkManifests(c, new Map([[1, event()]]), checkpointsDir);
  t.match(c.mismatches, [
    { seq: 7, eventType: 'policy.published', field: 'checkpoint files of v1 (manifest digest)' },
  ]);
  // Through the audit itself.
  const report = auditRun([event()], { checkpointsDir });
  t.match(
    report.mismatches.map((m) => m.field),
    ['checkpoint files of v1 (manifest digest)'],
  );
  writeFileSync(join(dir, 'config.json'), '{"model_type":"gpt2","layer_norm_epsilon":1e-5}');
  writeFileSync(join(dir, 'extra.bin'), 'x');
  const c2 = new Collector();
  checkManifests(c2, new Map([[1, event()]]), checkpointsDir);
  t.equal(c2.mismatches.length, 1);
});

t.test('a recorded digest that is not the recorded manifest is a mismatch; v1 logs get a note', async (t) => {
  const { event } = setup(t);
  const c = new Collector();
  checkManifests(c, new Map([[1, event({ manifestSha256: 'a'.repeat(64) })]]));
  t.match(c.mismatches, [{ field: 'manifestSha256', recorded: 'a'.repeat(64) }]);
  const old = new Collector();
  checkManifests(old, new Map([[1, event({ manifest: null, manifestSha256: null })]]));
  t.same(old.mismatches, []);
  t.match([...old.notes], [/checkpoint manifests: not supported by this log/]);
});
