import t from 'tap';
import { sampleRowBaseline } from '../bench/sampler-baseline.js';
import { SamplingError, sampleBatch, sampleRow, validateSampling } from '../src/gpu/sampler.js';
import { piecesDetokenizer, StopChecker, StopConfigError } from '../src/gpu/stop.js';
import { Rng } from '../src/util/rng.js';

/** Plain float64 log-softmax of logits / T. */
function logSoftmax(logits: number[], T = 1): number[] {
  const s = logits.map((l) => l / T);
  const m = Math.max(...s);
  const lse = m + Math.log(s.reduce((a, x) => a + Math.exp(x - m), 0));
  return s.map((x) => x - lse);
}

function frequencies(
  logits: number[],
  opts: { temperature: number; topP: number },
  n: number,
  seed: number,
): number[] {
  const rng = new Rng(seed);
  const counts = new Array(logits.length).fill(0);
  const l = Float32Array.from(logits);
  for (let i = 0; i < n; i++) counts[sampleRow(l, 0, l.length, opts, rng).token]++;
  return counts.map((c) => c / n);
}

const LOGITS = [1.0, 2.0, 0.5, -1.0, 1.5];

t.test('greedy takes the argmax (ties to the lowest id) and reports the T=1 logprob', async (t) => {
  const s = sampleRow(Float32Array.from([0, 3, 3, 1]), 0, 4, { temperature: 0, topP: 1 }, new Rng(1));
  t.equal(s.token, 1);
  t.equal(s.drawLogprob, 0);
  t.ok(Math.abs(s.logprob - logSoftmax([0, 3, 3, 1])[1]) < 1e-12);
  t.equal(s.policyLogprob, s.logprob);
});

t.test('T=1 draws follow softmax(logits); the three logprobs coincide', async (t) => {
  const f = frequencies(LOGITS, { temperature: 1, topP: 1 }, 40000, 7);
  const p = logSoftmax(LOGITS).map(Math.exp);
  for (let i = 0; i < p.length; i++) t.ok(Math.abs(f[i] - p[i]) < 0.01, `token ${i}: ${f[i]} vs ${p[i]}`);
  const s = sampleRow(Float32Array.from(LOGITS), 0, 5, { temperature: 1, topP: 1 }, new Rng(3));
  t.ok(Math.abs(s.logprob - logSoftmax(LOGITS)[s.token]) < 1e-9);
  t.ok(Math.abs(s.policyLogprob - s.logprob) < 1e-12);
  t.ok(Math.abs(s.drawLogprob - s.logprob) < 1e-12);
});

t.test('temperature sharpens the distribution; logprob is T-scaled, policyLogprob is T=1', async (t) => {
  const T = 0.5;
  const f = frequencies(LOGITS, { temperature: T, topP: 1 }, 40000, 8);
  const p = logSoftmax(LOGITS, T).map(Math.exp);
  for (let i = 0; i < p.length; i++) t.ok(Math.abs(f[i] - p[i]) < 0.01, `token ${i}: ${f[i]} vs ${p[i]}`);
  const s = sampleRow(Float32Array.from(LOGITS), 0, 5, { temperature: T, topP: 1 }, new Rng(4));
  t.ok(Math.abs(s.logprob - logSoftmax(LOGITS, T)[s.token]) < 1e-9);
  t.ok(Math.abs(s.policyLogprob - logSoftmax(LOGITS)[s.token]) < 1e-9);
});

t.test('top-p keeps the smallest nucleus reaching p, renormalised', async (t) => {
  // softmax(LOGITS): token 1 ~0.445, token 4 ~0.270, token 0 ~0.164, token 2 ~0.099, token 3 ~0.022
  const p = logSoftmax(LOGITS).map(Math.exp);
  const topP = 0.8; // 0.445 + 0.270 < 0.8 <= + 0.164: nucleus {1, 4, 0}
  const nucleus = [1, 4, 0];
  const mass = nucleus.reduce((a, i) => a + p[i], 0);
  const f = frequencies(LOGITS, { temperature: 1, topP }, 40000, 9);
  t.equal(f[2] + f[3], 0, 'tokens outside the nucleus are never drawn');
  for (const i of nucleus) t.ok(Math.abs(f[i] - p[i] / mass) < 0.01, `token ${i}: ${f[i]} vs ${p[i] / mass}`);
  const s = sampleRow(Float32Array.from(LOGITS), 0, 5, { temperature: 1, topP }, new Rng(5));
  t.ok(Math.abs(s.drawLogprob - Math.log(p[s.token] / mass)) < 1e-9, 'drawLogprob is renormalised');
  t.ok(Math.abs(s.logprob - Math.log(p[s.token])) < 1e-9, 'logprob is not');
});

t.test('per-row seeds: a row samples the same token whatever batch it sits in', async (t) => {
  const V = 5;
  const rowA = Float32Array.from(LOGITS);
  const rowB = Float32Array.from([0, 0, 0, 0, 3]);
  const batch = new Float32Array(2 * V);
  batch.set(rowB, 0);
  batch.set(rowA, V);
  const opts = { temperature: 1, topP: 0.9 };
  for (let seed = 0; seed < 20; seed++) {
    const alone = sampleRow(rowA, 0, V, opts, new Rng(seed));
    const inBatch = sampleBatch(batch, V, [opts, opts], [new Rng(999), new Rng(seed)])[1];
    t.same(inBatch, alone);
  }
});

t.test('bad logits and options are SamplingErrors', async (t) => {
  t.throws(
    () => sampleRow(Float32Array.from([0, Number.NaN]), 0, 2, { temperature: 1, topP: 1 }, new Rng(1)),
    SamplingError,
  );
  t.throws(
    () => sampleRow(Float32Array.from([-Infinity, -Infinity]), 0, 2, { temperature: 1, topP: 1 }, new Rng(1)),
    /-Infinity/,
  );
  t.throws(() => validateSampling({ temperature: -1, topP: 1 }), /temperature/);
  t.throws(() => validateSampling({ temperature: 1, topP: 0 }), /top-p/);
  t.throws(() => sampleBatch(new Float32Array(10), 5, [{ temperature: 1, topP: 1 }], [new Rng(1)]), /2 rows/);
  // A -Infinity logit (masked token) is never drawn and is fine otherwise.
  const f = frequencies([0, -Infinity, 0], { temperature: 1, topP: 1 }, 2000, 3);
  t.equal(f[1], 0);
});

t.test('stop: tokens, strings spanning tokens, and the length limit', async (t) => {
  const pieces = ['<', '/', 'answer', '>', 'x', 'EOS', '</search>'];
  const detok = piecesDetokenizer(pieces);
  const a = new StopChecker({ stopTokens: [5] }, 10);
  t.equal(a.push(4), undefined);
  t.equal(a.push(5), 'stop_token');
  t.same(a.generated, [4, 5], 'the stop token is kept');

  const b = new StopChecker({ stopStrings: ['</answer>', '</search>'] }, 20, detok);
  for (const tok of [4, 0, 1, 2]) t.equal(b.push(tok), undefined);
  t.equal(b.push(3), 'stop_string');
  t.equal(b.matched, '</answer>');
  t.throws(() => b.push(4), StopConfigError);

  const c = new StopChecker({ stopStrings: ['</search>'] }, 20, detok);
  t.equal(c.push(6), 'stop_string', 'a stop string inside a single token');

  const d = new StopChecker({ stopTokens: [5] }, 3);
  t.equal(d.push(4), undefined);
  t.equal(d.push(4), undefined);
  t.equal(d.push(4), 'length');

  t.throws(() => new StopChecker({ stopStrings: ['x'] }, 3), /need a detokenizer/);
  t.throws(() => new StopChecker({}, 0), /max new tokens/);
});

t.test(
  'the fused sampler equals the pre-issue-13 sampler bit for bit (token and all logprobs)',
  async (t) => {
    const gen = new Rng(77);
    const settings: { temperature: number; topP: number }[] = [];
    for (const temperature of [0, 0.3, 0.7, 1, 1.3, 2.5])
      for (const topP of [1, 1 - 2 ** -52, 0.999, 0.95, 0.9, 0.5, 0.1, 1e-9])
        settings.push({ temperature, topP });
    let rows = 0;
    const mismatches: string[] = [];
    for (let r = 0; r < 300; r++) {
      const V = 1 + gen.int(700);
      const spread = [0.5, 4, 12, 60, 900][r % 5]; // flat .. peaked (900: most tokens underflow)
      const logits = Float32Array.from({ length: V }, () => (gen.float() - 0.5) * spread);
      if (r % 7 === 0) for (let k = 0; k < V; k += 3) logits[k] = logits[0]; // many exact ties
      if (r % 11 === 0 && V > 1) logits[gen.int(V)] = Number.NEGATIVE_INFINITY; // a masked token
      for (const opts of settings) {
        const seed = gen.u32();
        const want = sampleRowBaseline(logits, 0, V, opts, new Rng(seed));
        const got = sampleRow(logits, 0, V, opts, new Rng(seed));
        rows++;
        const same = (['token', 'logprob', 'policyLogprob', 'drawLogprob'] as const).every((k) =>
          Object.is(got[k], want[k]),
        );
        if (!same) mismatches.push(`V ${V} ${JSON.stringify(opts)}: ${JSON.stringify({ got, want })}`);
      }
    }
    t.same(mismatches.slice(0, 3), [], `${mismatches.length} of ${rows} rows differ`);
    t.ok(rows > 10_000);
  },
);
