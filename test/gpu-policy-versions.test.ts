/**
 * Several policy versions in flight (issue 13 item 3): a request that names a version decodes on
 * the parameters the backend holds for it, in that version's own batch, beside the other versions'
 * batches; a request queued for version k when the parameters move to k+1 still decodes on k (the
 * race STATUS-NOTES named); a version that is not held (never, or out of the window) is refused
 * alone. Real ORT sessions on the tiny policy.
 */
import t, { type Test } from 'tap';
import { ContinuousBatcher } from '../src/gpu/continuous.js';
import {
  decodeBatch,
  type GenerateRequest,
  type GenerateResult,
  PolicyVersionNotHeldError,
} from '../src/gpu/decoder.js';
import { OrtDecodeBackend } from '../src/gpu/ort-policy.js';
import { TINY_CFG, tinyParams } from './helpers/tiny-policy.js';

const v0 = tinyParams(3);
const v1 = tinyParams(99);
const v2 = tinyParams(7);
const session = { device: 'cpu' as const, intraOpThreads: 1 };

async function backendOn(t: Test, params = v0) {
  const b = await OrtDecodeBackend.create(TINY_CFG, params, session);
  t.teardown(() => b.release());
  return b;
}

const batcher = (backend: OrtDecodeBackend, windowMs = 0) =>
  new ContinuousBatcher(async () => backend, { maxBatch: 64, maxBatchTokens: 4096, windowMs });

const request = (i: number): GenerateRequest => ({
  prompt: [1 + (i % 5), 2, 3 + (i % 3)].slice(0, 1 + (i % 3)),
  maxNewTokens: 4 + (i % 6),
  seed: 300 + i,
  temperature: i % 2 ? 1 : 0,
});

function sameDecode(t: Test, got: GenerateResult, want: GenerateResult, what: string) {
  t.same(got.tokens, want.tokens, `${what}: tokens`);
  const worst = Math.max(0, ...want.policyLogprobs.map((lp, k) => Math.abs(lp - got.policyLogprobs[k])));
  t.ok(worst < 1e-4, `${what}: logprobs within float32 noise (${worst})`);
}

t.test('requests of two versions decode side by side, each on its own parameters', async (t) => {
  const backend = await backendOn(t);
  const reqs = Array.from({ length: 8 }, (_, i) => request(i));
  const alone0 = await Promise.all(reqs.map((r) => decodeBatch(backend, [r]).then((x) => x[0])));
  backend.holdVersion(0, 2);
  backend.setParams(v1);
  backend.holdVersion(1, 2);
  const alone1 = await Promise.all(reqs.map((r) => decodeBatch(backend, [r]).then((x) => x[0])));
  t.notSame(
    alone0.map((r) => r.policyLogprobs),
    alone1.map((r) => r.policyLogprobs),
    'the two versions decode differently',
  );
  const b = batcher(backend);
  const got = await Promise.all(reqs.map((r, i) => b.generate({ ...r, version: i % 2 })));
  for (const [i, g] of got.entries())
    sameDecode(t, g, i % 2 ? alone1[i] : alone0[i], `request ${i} on v${i % 2}`);
  t.equal(b.stats.largestBatch, 4, 'one batch per version (4 rows each), never one batch of both');
  await b.close();
});

t.test('the race: a request queued for v0 when the parameters move to v1 decodes on v0', async (t) => {
  const backend = await backendOn(t);
  const req = { ...request(3), temperature: 0 };
  const [alone0] = await decodeBatch(backend, [req]);
  backend.holdVersion(0, 2);
  const b = batcher(backend, 5); // it waits 5 ms in the queue
  const queued = b.generate({ ...req, version: 0 });
  backend.setParams(v1); // a training step lands before the request is admitted
  backend.holdVersion(1, 2);
  sameDecode(t, await queued, alone0, 'the queued v0 request');
  const [alone1] = await decodeBatch(backend, [req]);
  sameDecode(t, await b.generate({ ...req, version: 1 }), alone1, 'a v1 request');
  t.notSame(alone1.policyLogprobs, alone0.policyLogprobs);
  await b.close();
});

t.test('a version not held is refused alone; the window keeps the newest; decode-only loads', async (t) => {
  const backend = await backendOn(t);
  backend.holdVersion(0, 2);
  backend.setParams(v1);
  backend.holdVersion(1, 2);
  backend.setParams(v2);
  backend.holdVersion(2, 2);
  t.same(backend.heldVersions(), [1, 2], 'keep 2: v0 left the window');
  const b = batcher(backend);
  const req = request(1);
  const refused = b.generate({ ...req, version: 0 });
  const served = b.generate({ ...req, version: 2 });
  await t.rejects(refused, PolicyVersionNotHeldError);
  await t.rejects(
    b.generate({ ...req, version: 5 }),
    /policy version 5 is not held by this decoder \(it holds v1, v2\)/,
  );
  const [alone2] = await decodeBatch(backend, [req]);
  sameDecode(t, await served, alone2, 'the v2 request beside the refused one');
  // An older version loaded for decoding only: the current parameters (v2) stay.
  const fresh = await backendOn(t, v0);
  const [alone0] = await decodeBatch(fresh, [req]);
  backend.holdVersion(0, 3, v0);
  t.same(backend.heldVersions(), [0, 1, 2]);
  sameDecode(t, await b.generate({ ...req, version: 0 }), alone0, 'v0 loaded for decoding');
  sameDecode(t, await b.generate(req), alone2, 'an unversioned request still runs the current v2');
  await b.close();
});
