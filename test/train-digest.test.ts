/**
 * The canonical digests of src/events/train-digest.ts. The known answers were computed outside
 * the code, with printf of the documented canonical bytes piped into sha256sum (the commands are
 * next to each constant).
 */
import t from 'tap';
import { canonicalJson, manifestDigest, manifestOf, trainRequestDigest } from '../src/events/train-digest.js';
import { tinyTrainRequest } from './helpers/tiny-train-request.js';

/** A one-row, T = 2 request with only inputIds as a tensor: the tiniest digestible request. */
const tiny = tinyTrainRequest;

t.test('known answer: a tiny request hashes to sha256sum of its documented canonical bytes', async (t) => {
  // (keys sorted by code unit: "lossTokens" before "losses", 'T' < 'e')
  // printf 'akbe-train-request/1\nmeta {"T":2,"epochs":1,"lossTokens":1,"losses":[{"name":"grpo","options":{"clipEps":0.2}}],
  //   "lr":0.001,"miniBatches":[[0]],"padId":0,"policyVersion":0,"rowInfo":[],"rows":1,
  //   "rowsPerUpdate":1,"runId":"r1","step":0}\ntensor inputIds int32 1x2 8\n\x05\x00\x00\x00\x07\x00\x00\x00' | sha256sum
  t.equal(
    trainRequestDigest('r1', tiny()),
    'e8b5d3ca25f479ff26df2db4e826015269f3dabaf975c584b02f2dc8ddcdc4b7',
  );
});

t.test('key order does not change the digest', async (t) => {
  const a = tiny();
  const b = {
    batch: { inputIds: Int32Array.of(5, 7), miniBatches: [[0]], rowInfo: [], lossTokens: 1, T: 2, rows: 1 },
    losses: [{ options: { clipEps: 0.2 }, name: 'grpo' }],
    padId: 0,
    rowsPerUpdate: 1,
    epochs: 1,
    lr: 0.001,
    policyVersion: 0,
    step: 0,
  };
  t.equal(trainRequestDigest('r1', b), trainRequestDigest('r1', a));
  t.equal(
    canonicalJson({ b: 1, a: { d: [1, { z: 0, y: 'x' }], c: undefined } }),
    '{"a":{"d":[1,{"y":"x","z":0}]},"b":1}',
  );
});

t.test(
  'a one-token change, a hyperparameter, the run, the step or the base version changes it',
  async (t) => {
    const base = trainRequestDigest('r1', tiny());
    const token = tiny();
    token.batch.inputIds[1] = 8;
    t.not(trainRequestDigest('r1', token), base, 'one token');
    t.not(trainRequestDigest('r1', { ...tiny(), lr: 0.002 }), base, 'lr');
    t.not(trainRequestDigest('r2', tiny()), base, 'run id');
    t.not(trainRequestDigest('r1', { ...tiny(), step: 1 }), base, 'step');
    t.not(trainRequestDigest('r1', { ...tiny(), policyVersion: 1 }), base, 'base version');
    const extra = tiny() as ReturnType<typeof tiny> & { batch: { lossMask?: Float32Array } };
    extra.batch.lossMask = Float32Array.of(1);
    t.not(trainRequestDigest('r1', extra), base, 'an added tensor');
    const dtype = tiny() as unknown as { batch: { inputIds: unknown } };
    dtype.batch.inputIds = Float32Array.of(5, 7);
    t.throws(
      () => trainRequestDigest('r1', dtype as ReturnType<typeof tiny>),
      /must be int32/,
      'a wrong dtype',
    );
  },
);

t.test('manifest digest: sorted names, each with its sha256 (known answer)', async (t) => {
  const files = manifestOf(
    new Map([
      ['b.bin', new TextEncoder().encode('yz')],
      ['a.json', new TextEncoder().encode('x')],
    ]),
  );
  // printf x | sha256sum; printf yz | sha256sum
  t.same(files, {
    'a.json': '2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881',
    'b.bin': '68d617d6d2ee5715af77d9795566cfaba9a43a33d14cbbc95831c507c935bad1',
  });
  // printf 'akbe-manifest/1\na.json <sha of x>\nb.bin <sha of yz>\n' | sha256sum
  t.equal(manifestDigest(files), '893b4c0e3fadbe3f82e97b61552967fafb51a2086f50d309fe1a06bc81619824');
  t.equal(manifestDigest({ 'b.bin': files['b.bin'], 'a.json': files['a.json'] }), manifestDigest(files));
  t.not(manifestDigest({ ...files, 'b.bin': files['a.json'] }), manifestDigest(files));
});

t.test(
  'v1 learner.step, policy.published and run.started upcast with what they lack null (not supported by this log)',
  async (t) => {
    const { UPCASTERS } = await import('../src/events/upcast.js');
    const meta = { runId: 'r', step: 0, policyVersion: 1, at: 1, dedupeId: 'x' };
    const ls = UPCASTERS.upcast({ type: 'learner.step', v: 1, data: { extra: {} }, meta });
    t.equal(ls.v, 2);
    t.same(ls.data, { extra: {}, requestSha256: null });
    const pp = UPCASTERS.upcast({ type: 'policy.published', v: 1, data: { version: 1 }, meta });
    t.same(pp.data, { version: 1, requestSha256: null, manifest: null, manifestSha256: null });
    const rs = UPCASTERS.upcast({ type: 'run.started', v: 1, data: { algo: 'grpo' }, meta });
    t.equal(rs.v, 2);
    t.same(
      rs.data,
      { algo: 'grpo', trainerRuntime: null, trainSigner: null },
      'run.started v1: no trainer runtime or signer recorded',
    );
  },
);
