import t from 'tap';
import { decodeBatch, type GenerateRequest } from '../src/gpu/decoder.js';
import { OrtDecodeBackend, OrtScorer } from '../src/gpu/ort-policy.js';
import { PolicyRuntime } from '../src/gpu/policy-runtime.js';
import { refLogprobs, refNextLogprobs } from './helpers/ref-gpt.js';
import { refSample } from './helpers/ref-sampler.js';
import { TINY_CFG, tinyParams } from './helpers/tiny-policy.js';

const cfg = TINY_CFG;
const params = tinyParams(3);

t.test('scoring sequences of different lengths matches the float64 reference', async (t) => {
  const scorer = await OrtScorer.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
  t.teardown(() => scorer.release());
  const seqs = [[1, 2, 3, 4, 5, 6, 7], [4], [12, 0, 5], Array.from({ length: 24 }, (_, i) => (i * 7) % 13)];
  const got = await scorer.logprobs(seqs);
  t.same(
    got.map((g) => g.length),
    [6, 0, 2, 23],
  );
  let worst = 0;
  seqs.forEach((s, i) => {
    refLogprobs(cfg, params, s).forEach((r, k) => {
      worst = Math.max(worst, Math.abs(r - got[i][k]));
    });
  });
  t.ok(worst < 1e-4, `max |ort - ref| = ${worst}`);
  await t.rejects(scorer.logprobs([[1, 13]]), /token id 13 is outside the vocabulary/);
  await t.rejects(scorer.logprobs([Array(25).fill(1)]), /more than the policy's context of 24/);
});

t.test('greedy batched decoding (left-padded prompts) follows the reference model row by row', async (t) => {
  const backend = await OrtDecodeBackend.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
  t.teardown(() => backend.release());
  const reqs: GenerateRequest[] = [
    { prompt: [1, 2, 3, 4, 5], maxNewTokens: 6, seed: 1, temperature: 0 },
    { prompt: [7], maxNewTokens: 4, seed: 2, temperature: 0 },
    { prompt: [3, 9, 11], maxNewTokens: 8, seed: 3, temperature: 0 },
  ];
  const results = await decodeBatch(backend, reqs);
  let worst = 0;
  results.forEach((r, i) => {
    t.equal(r.tokens.length, reqs[i].maxNewTokens);
    t.equal(r.finishReason, 'length');
    const ctx = [...reqs[i].prompt];
    r.tokens.forEach((tok, k) => {
      const lp = refNextLogprobs(cfg, params, ctx);
      const best = lp.indexOf(Math.max(...lp));
      t.equal(tok, best, `request ${i} token ${k}`);
      worst = Math.max(worst, Math.abs(lp[tok] - r.policyLogprobs[k]), Math.abs(lp[tok] - r.logprobs[k]));
      ctx.push(tok);
    });
  });
  t.ok(worst < 1e-4, `max logprob error ${worst}`);
});

t.test('sampled sequences under fixed seeds equal an independent temperature/top-p sampler', async (t) => {
  const backend = await OrtDecodeBackend.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
  t.teardown(() => backend.release());
  const settings = [
    { temperature: 0.6, topP: 1 },
    { temperature: 1, topP: 0.5 },
    { temperature: 1.8, topP: 0.8 },
    { temperature: 0.8, topP: 0.3 },
    { temperature: 1, topP: 1 },
  ];
  const reqs: GenerateRequest[] = settings.map((s, i) => ({
    prompt: [(3 * i + 1) % 13, (5 * i + 2) % 13],
    maxNewTokens: 10,
    seed: 900 + i,
    ...s,
  }));
  const got = await decodeBatch(backend, reqs);
  let worst = 0;
  let sensitive = 0;
  for (const [i, req] of reqs.entries()) {
    const opts = { maxNew: 10, seed: req.seed, temperature: req.temperature!, topP: req.topP! };
    const ref = refSample(cfg, params, req.prompt, opts);
    t.same(
      got[i].tokens,
      ref.map((d) => d.token),
      `request ${i} (T ${req.temperature}, top-p ${req.topP})`,
    );
    ref.forEach((d, k) => {
      worst = Math.max(
        worst,
        Math.abs(d.logprob - got[i].logprobs[k]),
        Math.abs(d.policyLogprob - got[i].policyLogprobs[k]),
      );
    });
    const plain = refSample(cfg, params, req.prompt, { ...opts, temperature: 1, topP: 1 });
    if (plain.some((d, k) => d.token !== ref[k].token)) sensitive++;
  }
  t.ok(worst < 1e-4, `max logprob error ${worst}`);
  t.ok(sensitive >= 3, `${sensitive} of 4 non-default settings change the sequence at the same seed`);
});

t.test('sampled rows do not depend on their batch-mates; stop tokens end a row early', async (t) => {
  const backend = await OrtDecodeBackend.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
  t.teardown(() => backend.release());
  const reqs: GenerateRequest[] = Array.from({ length: 6 }, (_, i) => ({
    prompt: Array.from({ length: 1 + (i % 4) }, (_, k) => (i + 3 * k) % 13),
    maxNewTokens: 5 + i,
    seed: 100 + i,
    temperature: 1,
    topP: i % 2 ? 0.9 : 1,
  }));
  const batched = await decodeBatch(backend, reqs);
  for (const [i, req] of reqs.entries()) {
    const [alone] = await decodeBatch(backend, [req]);
    t.same(batched[i].tokens, alone.tokens, `request ${i} tokens`);
    t.ok(batched[i].logprobs.every((lp, k) => Math.abs(lp - alone.logprobs[k]) < 1e-4));
  }
  const stopAt = batched[5].tokens[2];
  const [stopped] = await decodeBatch(backend, [{ ...reqs[5], stopTokens: [stopAt] }]);
  const first = batched[5].tokens.indexOf(stopAt);
  t.same(stopped.tokens, batched[5].tokens.slice(0, first + 1));
  t.equal(stopped.finishReason, 'stop_token');
});

t.test('the in-place cache step graph decodes exactly like the concat-cache graph', async (t) => {
  const cached = await OrtDecodeBackend.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
  const concat = await OrtDecodeBackend.create(
    cfg,
    params,
    { device: 'cpu', intraOpThreads: 1 },
    { concatCache: true },
  );
  t.teardown(async () => {
    await cached.release();
    await concat.release();
  });
  const reqs: GenerateRequest[] = Array.from({ length: 5 }, (_, i) => ({
    prompt: Array.from({ length: 1 + ((i * 3) % 5) }, (_, k) => (i * 5 + k) % 13),
    maxNewTokens: 4 + 3 * i,
    seed: 40 + i,
    stopTokens: i === 2 ? [1, 2, 3] : [],
  }));
  const a = await decodeBatch(cached, reqs);
  const b = await decodeBatch(concat, reqs);
  for (const [i, r] of a.entries()) {
    t.same(r.tokens, b[i].tokens, `request ${i}`);
    t.equal(r.finishReason, b[i].finishReason);
    t.ok(r.policyLogprobs.every((lp, k) => Math.abs(lp - b[i].policyLogprobs[k]) < 1e-5));
  }
});

t.test(
  '50 concurrent generate calls are prefilled in a few forwards; each equals its unbatched result',
  async (t) => {
    const rt = await PolicyRuntime.create(cfg, params, {
      device: 'cpu',
      intraOpThreads: 1,
      maxBatch: 32,
      windowMs: 5,
    });
    t.teardown(() => rt.close());
    const reqs: GenerateRequest[] = Array.from({ length: 50 }, (_, i) => ({
      prompt: [i % 13, (i * 5) % 13],
      maxNewTokens: 2 + (i % 5),
      seed: 7000 + i,
      stopTokens: i % 3 === 0 ? [0] : [],
    }));
    const replies = await Promise.all(reqs.map((r) => rt.generate(r)));
    const stats = (rt as unknown as { batcher: { stats: { prefills: number } } }).batcher.stats;
    t.ok(stats.prefills <= 4, `${stats.prefills} prefills`);
    for (const [i, req] of reqs.entries()) {
      const [alone] = await rt.generateBatch([req]);
      t.same(replies[i].tokens, alone.tokens, `request ${i}`);
    }
  },
);

t.test('a batch finishes on the parameters it started with, even if new ones arrive mid-batch', async (t) => {
  const rt = await PolicyRuntime.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
  t.teardown(() => rt.close());
  const req: GenerateRequest = { prompt: [1, 2, 3], maxNewTokens: 12, seed: 5, temperature: 0 };
  const [before] = await rt.generateBatch([req]);
  const running = rt.generateBatch([req]);
  await new Promise((r) => setImmediate(r)); // the batch is now between steps
  rt.setParams(tinyParams(99));
  const [during] = await running;
  t.same(during.tokens, before.tokens);
  const [after] = await rt.generateBatch([req]);
  t.notSame(after.policyLogprobs, before.policyLogprobs, 'the next batch runs the new parameters');
});
