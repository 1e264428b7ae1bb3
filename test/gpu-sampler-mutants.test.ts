/**
 * The sampler's option checks and error messages, exactly, and hand-worked draws at the edges
 * (issue 16, mutation testing; gpu-runtime-sampler.test.ts holds the distributions and the
 * bit-for-bit comparison with the baseline sampler).
 */
import t from 'tap';
import { SamplingError, sampleBatch, sampleRow, validateSampling } from '../src/gpu/sampler.js';
import { Rng } from '../src/util/rng.js';

t.test('validateSampling: the allowed range, both ends, with exact messages', async (t) => {
  for (const ok of [
    { temperature: 0, topP: 1 },
    { temperature: 1e-9, topP: 1e-9 },
    { temperature: 1e6, topP: 0.5 },
  ])
    t.doesNotThrow(() => validateSampling(ok), JSON.stringify(ok));
  const bad = (temperature: number, topP: number, message: string) =>
    t.throws(() => validateSampling({ temperature, topP }), { name: 'SamplingError', message });
  bad(-1e-9, 1, 'temperature must be a finite number >= 0, got -1e-9');
  bad(Number.NaN, 1, 'temperature must be a finite number >= 0, got NaN');
  bad(Infinity, 1, 'temperature must be a finite number >= 0, got Infinity');
  bad(1, 0, 'top-p must be in (0, 1], got 0');
  bad(1, 1.0000001, 'top-p must be in (0, 1], got 1.0000001');
  bad(1, Number.NaN, 'top-p must be in (0, 1], got NaN');
  bad(1, -0.5, 'top-p must be in (0, 1], got -0.5');
});

t.test('sampleRow: exact errors for logits without a distribution', async (t) => {
  const opts = { temperature: 1, topP: 1 };
  t.throws(() => sampleRow(Float32Array.from([0, 1, Number.NaN]), 0, 3, opts, new Rng(1)), {
    name: 'SamplingError',
    message: 'logit 2 is NaN: the policy produced no distribution',
  });
  t.throws(() => sampleRow(Float32Array.from([5, -Infinity, -Infinity]), 1, 2, opts, new Rng(1)), {
    message: 'every logit is -Infinity: no token can be sampled',
  });
  t.ok(new SamplingError('x') instanceof Error);
  t.equal(new SamplingError('x').name, 'SamplingError');
});

t.test('sampleRow reads its own row at the offset; greedy ties go to the lowest id', async (t) => {
  // Row 1 of [[9, 0, 0], [0, 2, 2]]: greedy picks id 1 (the first 2), log softmax = 2 - ln(1 + 2e^2).
  const logits = Float32Array.from([9, 0, 0, 0, 2, 2]);
  const s = sampleRow(logits, 3, 3, { temperature: 0, topP: 0.1 }, new Rng(1));
  const lp = 2 - Math.log(1 + 2 * Math.exp(2));
  t.equal(s.token, 1);
  t.ok(Math.abs(s.logprob - lp) < 1e-12, `${s.logprob} vs ${lp}`);
  t.equal(s.policyLogprob, s.logprob, 'greedy: logprob is the T = 1 one');
  t.equal(s.drawLogprob, 0, 'greedy is deterministic');
  // A single huge logit at T = 1: certain, every logprob 0 up to rounding.
  const one = sampleRow(Float32Array.from([0, 200, 0]), 0, 3, { temperature: 1, topP: 1 }, new Rng(2));
  t.equal(one.token, 1);
  t.ok(Math.abs(one.logprob) < 1e-12 && Math.abs(one.drawLogprob) < 1e-12);
});

t.test('a uniform row: the draw is the inverse CDF of the first float, by hand', async (t) => {
  // Four equal logits, T = 1: token = floor(4 u) for u = the Rng's first float.
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    const u = new Rng(seed).float();
    const s = sampleRow(
      Float32Array.from([0.5, 0.5, 0.5, 0.5]),
      0,
      4,
      { temperature: 1, topP: 1 },
      new Rng(seed),
    );
    t.equal(s.token, Math.floor(4 * u), `seed ${seed}: u = ${u}`);
    t.ok(Math.abs(s.logprob - Math.log(0.25)) < 1e-12);
    // At T = 2 the row is still uniform: same token, same logprobs.
    const hot = sampleRow(
      Float32Array.from([0.5, 0.5, 0.5, 0.5]),
      0,
      4,
      { temperature: 2, topP: 1 },
      new Rng(seed),
    );
    t.equal(hot.token, s.token);
    t.ok(Math.abs(hot.policyLogprob - Math.log(0.25)) < 1e-12);
    // top-p 0.5 over four ties: the nucleus keeps every token tied with the last one admitted.
    const nuc = sampleRow(
      Float32Array.from([0.5, 0.5, 0.5, 0.5]),
      0,
      4,
      { temperature: 1, topP: 0.5 },
      new Rng(seed),
    );
    t.equal(nuc.token, s.token, 'ties all kept');
    t.ok(Math.abs(nuc.drawLogprob - Math.log(0.25)) < 1e-12);
  }
  // Two of four tokens masked: u < 1/2 draws id 1, else id 3.
  for (const seed of [11, 12, 13, 14]) {
    const u = new Rng(seed).float();
    const s = sampleRow(
      Float32Array.from([-Infinity, 1, -Infinity, 1]),
      0,
      4,
      { temperature: 0.7, topP: 1 },
      new Rng(seed),
    );
    t.equal(s.token, u < 0.5 ? 1 : 3, `seed ${seed}: u = ${u}`);
    t.ok(Math.abs(s.drawLogprob - Math.log(0.5)) < 1e-12);
  }
});

t.test(
  'top-p by hand: p = (0.5, 0.3, 0.2), top-p 0.6 keeps {0, 1}, renormalised to (5/8, 3/8)',
  async (t) => {
    const logits = Float32Array.from([Math.log(0.5), Math.log(0.3), Math.log(0.2)]);
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const u = new Rng(seed).float();
      const s = sampleRow(logits, 0, 3, { temperature: 1, topP: 0.6 }, new Rng(seed));
      t.equal(s.token, u < 5 / 8 ? 0 : 1, `seed ${seed}: u = ${u}`);
      const p = s.token === 0 ? 0.5 : 0.3;
      t.ok(Math.abs(s.drawLogprob - Math.log(p / 0.8)) < 1e-6, 'renormalised over the nucleus');
      t.ok(Math.abs(s.logprob - Math.log(p)) < 1e-6, 'the full softmax');
    }
    // top-p 2/3 is exactly the first token's mass: the nucleus is {0} alone.
    const s = sampleRow(
      Float32Array.from([Math.log(2), 0, -Infinity]),
      0,
      3,
      { temperature: 1, topP: 2 / 3 },
      new Rng(9),
    );
    t.equal(s.token, 0);
    t.ok(Math.abs(s.drawLogprob) < 1e-12);
  },
);

t.test(
  'top-p: a token outside the nucleus is never drawn, even when it comes first in id order',
  async (t) => {
    // p = (0.2, 0.5, 0.3): top-p 0.6 keeps {1, 2} (0.5 + 0.3 >= 0.6), renormalised to (5/8, 3/8).
    // The draw walks ids in order, so the excluded token 0 would take every u below its share.
    const logits = Float32Array.from([Math.log(0.2), Math.log(0.5), Math.log(0.3)]);
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const u = new Rng(seed).float();
      const s = sampleRow(logits, 0, 3, { temperature: 1, topP: 0.6 }, new Rng(seed));
      t.equal(s.token, u < 5 / 8 ? 1 : 2, `seed ${seed}: u = ${u}`);
    }
  },
);

t.test('sampleBatch: rows, options and rngs must agree, with the exact message', async (t) => {
  const opts = { temperature: 0, topP: 1 };
  t.throws(() => sampleBatch(new Float32Array(7), 3, [opts, opts], [new Rng(1), new Rng(2)]), {
    name: 'SamplingError',
    message: 'logits hold 2.3333333333333335 rows of 3, but 2 options and 2 rngs were given',
  });
  t.throws(() => sampleBatch(new Float32Array(6), 3, [opts, opts], [new Rng(1)]), {
    message: 'logits hold 2 rows of 3, but 2 options and 1 rngs were given',
  });
  t.throws(() => sampleBatch(new Float32Array(6), 3, [opts], [new Rng(1), new Rng(2)]), {
    message: 'logits hold 2 rows of 3, but 1 options and 2 rngs were given',
  });
  const out = sampleBatch(Float32Array.from([0, 5, 1, 7, 0, 0]), 3, [opts, opts], [new Rng(1), new Rng(2)]);
  t.strictSame(
    out.map((s) => s.token),
    [1, 0],
  );
  t.strictSame(sampleBatch(new Float32Array(0), 3, [], []), []);
});
