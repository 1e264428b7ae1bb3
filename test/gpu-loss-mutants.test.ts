/**
 * The loss graph's metrics and guards on hand-worked batches (issue 16, mutation testing): the
 * entropy metric (only checked to fall during training before), the clip fraction and k3 KL on
 * chosen ratios, masked means of empty masks, and the decoupled form's missing cap. Float64
 * graphs in onnxruntime; every expected value is worked out in the comments.
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { Graph } from '../src/gpu/graph/index.js';
import { type Aggregation, maskedMean, policyLoss } from '../src/gpu/losses.js';

interface Batch {
  B: number;
  L: number;
  V?: number;
  tokenLogp: number[];
  oldLogp: number[];
  lossMask: number[];
  advantages: number[];
  pgWeight: number[];
  akbeWeight: number[];
  /** [B, L, V] full log-softmax, for the entropy metric. */
  logp?: number[];
}

const HYPER = { lo: 0.2, hi: 0.2, c: 3, clamp: 20, lambda: 0.5 };

async function run(x: Batch, aggregation: Aggregation = 'token-mean') {
  const { B, L } = x;
  const g = new Graph();
  const f = (name: string, shape: number[]) => g.input(name, 'float64', shape);
  const out = policyLoss(
    {
      tokenLogp: f('tok', [B, L]),
      logp: x.logp ? f('logp', [B, L, x.V!]) : undefined,
      oldLogp: f('old', [B, L]),
      lossMask: f('mask', [B, L]),
      advantages: f('adv', [B]),
      pgWeight: f('pgw', [B]),
      akbeWeight: f('akw', [B]),
    },
    {
      clipEpsLow: f('lo', []),
      clipEpsHigh: f('hi', []),
      dualClipC: f('c', []),
      ratioClamp: f('clamp', []),
      lambda: f('lambda', []),
    },
    { aggregation },
  );
  for (const [k, v] of Object.entries(out)) if (v) g.output(v, k);
  const s = await ort.InferenceSession.create(g.serialize());
  const T = (v: number[], dims: number[]) => new ort.Tensor('float64', Float64Array.from(v), dims);
  const feeds: Record<string, ort.Tensor> = {
    tok: T(x.tokenLogp, [B, L]),
    old: T(x.oldLogp, [B, L]),
    mask: T(x.lossMask, [B, L]),
    adv: T(x.advantages, [B]),
    pgw: T(x.pgWeight, [B]),
    akw: T(x.akbeWeight, [B]),
    lo: T([HYPER.lo], []),
    hi: T([HYPER.hi], []),
    c: T([HYPER.c], []),
    clamp: T([HYPER.clamp], []),
    lambda: T([HYPER.lambda], []),
  };
  if (x.logp) feeds.logp = T(x.logp, [B, L, x.V!]);
  const r = await s.run(feeds);
  await s.release();
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, (v.data as Float64Array)[0]]));
}

const close = (t: { ok(pass: boolean, message: string): void }, got: number, want: number, what: string) =>
  t.ok(Math.abs(got - want) <= 1e-12, `${what}: ${got} vs hand-worked ${want}`);
const H = (p: number[]) => -p.reduce((a, q) => a + q * Math.log(q), 0);

t.test('entropy: token mean of -sum p log p over GRPO rows and AKBE target rows only', async (t) => {
  // Three rows of two positions over V = 2; position 1 of every row is masked out.
  //   row 0: a GRPO sample (pg 1, akbe 0),  position 0 p = (0.5, 0.5): H = ln 2
  //   row 1: an AKBE target only (pg 0, akbe 0.25), p = (0.9, 0.1)
  //   row 2: neither (pg 0, akbe 0): not counted
  // entropy = (ln 2 + H(0.9, 0.1)) / 2.
  const rows = [
    [0.5, 0.5, 0.3, 0.7],
    [0.9, 0.1, 0.6, 0.4],
    [0.2, 0.8, 0.99, 0.01],
  ];
  const x: Batch = {
    B: 3,
    L: 2,
    V: 2,
    tokenLogp: [-1, -1, -1, -1, -1, -1],
    oldLogp: [-1, -1, -1, -1, -1, -1],
    lossMask: [1, 0, 1, 0, 1, 0],
    advantages: [1, 1, 1],
    pgWeight: [1, 0, 0],
    akbeWeight: [0, 0.25, 0],
    logp: rows.flat().map(Math.log),
  };
  const r = await run(x);
  close(t, r.entropy, (Math.LN2 + H([0.9, 0.1])) / 2, 'entropy');
  // All three rows weighted and the mask opened on row 2's second position: (ln 2 + H1 + H2 + H2') / 4.
  const all = await run({ ...x, pgWeight: [1, 0, 1], lossMask: [1, 0, 1, 0, 1, 1] });
  close(
    t,
    all.entropy,
    (Math.LN2 + H([0.9, 0.1]) + H([0.2, 0.8]) + H([0.99, 0.01])) / 4,
    'entropy, all rows',
  );
  const none = await run({ ...x, logp: undefined });
  t.equal(none.entropy, undefined, 'no full log-softmax given: no entropy output');
});

t.test('clip fraction and k3 KL on chosen ratios (token-mean over GRPO tokens)', async (t) => {
  // One row, A = +1, four tokens with ratios r = 0.5, 1, 1.1, 1.5 (eps 0.2): the clipped term
  // -A clip(r) is the larger one where clip(r) < r, i.e. only r = 1.5 -> clip fraction 1/4.
  // (r = 0.5 with A > 0: -0.5 > -0.8, the unclipped term wins.) A fifth token is masked.
  // k3 = (r - 1) - ln r per token, mean over the four.
  const ratios = [0.5, 1, 1.1, 1.5, 7];
  const x: Batch = {
    B: 1,
    L: 5,
    tokenLogp: ratios.map((r) => -2 + Math.log(r)),
    oldLogp: ratios.map(() => -2),
    lossMask: [1, 1, 1, 1, 0],
    advantages: [1],
    pgWeight: [1],
    akbeWeight: [0],
  };
  const r = await run(x);
  close(t, r.clipFrac, 0.25, 'clip fraction');
  const k3 = ratios.slice(0, 4).map((q) => q - 1 - Math.log(q));
  close(t, r.approxKl, k3.reduce((a, b) => a + b) / 4, 'approx KL');
  // pg loss: mean of -A min-side: -0.5, -1, -1.1, -1.2 (clipped at 1.2) -> -3.8 / 4.
  close(t, r.pgLoss, -3.8 / 4, 'L_GRPO');
  // A < 0 flips which side clips: r = 0.5 < 0.8 is clipped (-A 0.8 = 0.8 > 0.5), r = 1.5 is not.
  const neg = await run({ ...x, advantages: [-1] });
  close(t, neg.clipFrac, 0.25, 'clip fraction, A < 0');
  close(t, neg.pgLoss, (0.8 + 1 + 1.1 + 1.5) / 4, 'L_GRPO, A < 0');
});

t.test('masked means: an empty mask gives 0, seq-mean skips empty rows', async (t) => {
  // Row 0: tokens x = 1, 3 (both kept) -> mean 2; row 1: x = 10 with mask 0 -> no row; row 2: x = 4 -> 4.
  // seq-mean-token-mean = (2 + 4) / 2 = 3; token-mean = (1 + 3 + 4) / 3.
  const g = new Graph();
  const xv = g.input('x', 'float64', [3, 2]);
  const mv = g.input('m', 'float64', [3, 2]);
  g.output(maskedMean(xv, mv, 'token-mean'), 'tok');
  g.output(maskedMean(xv, mv, 'seq-mean-token-mean'), 'seq');
  g.output(maskedMean(xv, mv), 'dflt');
  const s = await ort.InferenceSession.create(g.serialize());
  const T = (v: number[]) => new ort.Tensor('float64', Float64Array.from(v), [3, 2]);
  const get = async (x: number[], m: number[]) => {
    const r = await s.run({ x: T(x), m: T(m) });
    return [r.tok, r.seq, r.dflt].map((v) => (v.data as Float64Array)[0]);
  };
  const [tok, seq, dflt] = await get([1, 3, 10, 10, 4, 9], [1, 1, 0, 0, 1, 0]);
  close(t, tok, 8 / 3, 'token-mean');
  close(t, seq, 3, 'seq-mean-token-mean');
  close(t, dflt, 8 / 3, 'the default is token-mean');
  t.strictSame(await get([1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0]), [0, 0, 0], 'an all-zero mask: 0, not NaN');
  await s.release();
});

t.test('the decoupled form without a behaviour-weight cap is refused', async (t) => {
  const g = new Graph();
  const f = (name: string, shape: number[]) => g.input(name, 'float64', shape);
  const s = () => f(`s${Math.random()}`, []);
  t.throws(
    () =>
      policyLoss(
        {
          tokenLogp: f('tok', [1, 1]),
          oldLogp: f('old', [1, 1]),
          proxLogp: f('prox', [1, 1]),
          lossMask: f('mask', [1, 1]),
          advantages: f('adv', [1]),
          pgWeight: f('pgw', [1]),
          akbeWeight: f('akw', [1]),
        },
        { clipEpsLow: s(), clipEpsHigh: s(), dualClipC: s(), ratioClamp: s(), lambda: s() },
      ),
    { message: 'policyLoss: the decoupled form needs behaviourWeightCap' },
  );
});
