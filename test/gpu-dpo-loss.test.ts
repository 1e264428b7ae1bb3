/**
 * The DPO term of dpo-akbe (src/gpu/losses.ts dpoTerm; Rafailov et al. 2023, eq. 7), worked by
 * hand on a tiny batch of 4 rows x 3 positions and 2 pairs, beta = 0.5:
 *   row 0 (pair 0 chosen)   mask 1 1 0, logp -1 -2 -9      s = -3, ref -4: s - ref = +1
 *   row 1 (pair 0 rejected) mask 1 1 1, logp -.5 -.5 -1    s = -2, ref -1: s - ref = -1
 *   row 2 (pair 1 chosen)   mask 1 0 0, logp -3 -1 -1      s = -3, ref -1: s - ref = -2
 *   row 3 (pair 1 rejected) mask 0 1 1, logp -7 -1 -1      s = -2, ref -2: s - ref =  0
 *   pair 0: m = 1 - (-1) = 2, z = 1:   -log sigmoid(1)  = log(1 + e^-1) = 0.3132616875182228
 *   pair 1: m = -2 - 0 = -2, z = -1:   -log sigmoid(-1) = log(1 + e)    = 1.3132616875182228
 *   L_DPO = (0.3132616875182228 + 1.3132616875182228) / 2 = 0.8132616875182228
 * (the -9 and -7 are masked out: they must not count). The gradient w.r.t. the token logprobs is
 * checked against float64 central differences; the batch (src/rl/batch.ts) builds the same pair
 * slots from a DPO step's questions; a whole training step whose reference is the policy itself
 * gives L_DPO = log 2 (margin 0).
 */
import t from 'tap';
import { dpoTerm, policyLoss } from '../src/gpu/losses.js';
import { PolicyRuntime } from '../src/gpu/policy-runtime.js';
import { Trainer } from '../src/gpu/trainer.js';
import { assembleBatch, type BatchQuestion } from '../src/rl/batch.js';
import { sliceMiniBatch } from '../src/rl/mini-batch.js';
import type { BoundaryLabel } from '../src/rl/types.js';
import { gradcheck } from './helpers/gradcheck.js';
import { rollout } from './helpers/rollouts.js';
import { TINY_CFG, tinyParams } from './helpers/tiny-policy.js';

const HAND = (Math.log(1 + Math.exp(-1)) + Math.log(1 + Math.E)) / 2;
const fixed = (values: number[], shape: number[]) => ({ values, shape, noGrad: true });
const LOGP = [-1, -2, -9, -0.5, -0.5, -1, -3, -1, -1, -7, -1, -1];
const MASK = [1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1];
const PAIRS = [1, -1, 0, 0, 0, 0, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

t.test('L_DPO: the hand-worked value, gradient = central differences', async (t) => {
  t.equal(HAND.toFixed(12), '0.813261687518', 'the hand sum');
  const res = await gradcheck(t, {
    inputs: {
      logp: { shape: [4, 3], values: LOGP },
      mask: fixed(MASK, [4, 3]),
      pairs: fixed(PAIRS, [4, 4]),
      weight: fixed([0.5, 0.5, 0, 0], [4]),
      ref: fixed([-4, -1, -1, -2], [4]),
      beta: fixed([0.5], []),
    },
    build: (x) => dpoTerm(x.logp, x.mask, { pairs: x.pairs, weight: x.weight, refLogp: x.ref, beta: x.beta }),
    expect: () => [HAND],
    atol: 1e-12,
    rtol: 1e-7,
  });
  t.ok(res.errors.logp !== undefined, 'the gradient was checked');
});

t.test('far margins neither overflow nor lose the gradient; the loss adds lambda * L_DPO', async (t) => {
  // z = +-400: -log sigmoid(400) ~ 0, -log sigmoid(-400) = 400 (a naive log(sigmoid) gives Inf).
  await gradcheck(t, {
    inputs: {
      logp: { shape: [2, 1], values: [-1, -1] },
      mask: fixed([1, 1], [2, 1]),
      pairs: fixed([1, -1, -1, 1], [2, 2]),
      weight: fixed([1, 0], [2]),
      ref: fixed([-401, -1], [2]),
      beta: fixed([1], []),
    },
    build: (x) => dpoTerm(x.logp, x.mask, { pairs: x.pairs, weight: x.weight, refLogp: x.ref, beta: x.beta }),
    expect: () => [0],
    atol: 1e-12,
  });
  await gradcheck(t, {
    inputs: {
      logp: { shape: [2, 1], values: [-1, -1] },
      mask: fixed([1, 1], [2, 1]),
      pairs: fixed([-1, 1, 0, 0], [2, 2]),
      weight: fixed([1, 0], [2]),
      ref: fixed([-401, -1], [2]),
      beta: fixed([1], []),
    },
    build: (x) => dpoTerm(x.logp, x.mask, { pairs: x.pairs, weight: x.weight, refLogp: x.ref, beta: x.beta }),
    expect: () => [400],
    atol: 1e-9,
  });
  // policyLoss: no GRPO rows, no AKBE weights: loss = lambda * L_DPO = 0.05 * HAND.
  await gradcheck(t, {
    inputs: {
      logp: { shape: [4, 3], values: LOGP },
      old: fixed(LOGP, [4, 3]),
      mask: fixed(MASK, [4, 3]),
      zero: fixed([0, 0, 0, 0], [4]),
      pairs: fixed(PAIRS, [4, 4]),
      weight: fixed([0.5, 0.5, 0, 0], [4]),
      ref: fixed([-4, -1, -1, -2], [4]),
      beta: fixed([0.5], []),
      lo: fixed([0.2], []),
      c: fixed([3], []),
      clamp: fixed([20], []),
      lambda: fixed([0.05], []),
    },
    build: (x) =>
      policyLoss(
        {
          tokenLogp: x.logp,
          oldLogp: x.old,
          lossMask: x.mask,
          advantages: x.zero,
          pgWeight: x.zero,
          akbeWeight: x.zero,
          dpo: { pairs: x.pairs, weight: x.weight, refLogp: x.ref, beta: x.beta },
        },
        { clipEpsLow: x.lo, clipEpsHigh: x.lo, dualClipC: x.c, ratioClamp: x.clamp, lambda: x.lambda },
      ).loss,
    expect: () => [0.05 * HAND],
    atol: 1e-12,
  });
});

function label(q: string, rolloutId: string, path: 'with-tool' | 'no-tool'): BoundaryLabel {
  return {
    questionId: q,
    wt: true,
    nt: path === 'no-tool',
    category: path === 'no-tool' ? 'efficiency' : 'tool-dependent',
    target: { rolloutId, path, context: 'with-tool', candidates: 1 },
    tieBreakSeed: 0,
  };
}

// a: target a.wt0, rejected a.wt2; b: no-tool target b.nt0 (re-conditioned), rejected b.wt1;
// c: both-wrong (no pair). Mini-batches of 2 questions: {a, b} and {c}.
const questions = (): BatchQuestion[] => [
  {
    group: {
      questionId: 'a',
      step: 0,
      policyVersion: 0,
      gold: ['x'],
      withToolPrompt: [1, 2],
      withTool: [0, 1, 2].map((index) => rollout({ q: 'a', index, reward: index === 0 ? 1 : 0 })),
      noTool: [rollout({ q: 'a', index: 0, reward: 0, path: 'no-tool' })],
    },
    label: label('a', 'a.wt0', 'with-tool'),
    advantages: [1, -0.5, -0.5],
    rejected: 'a.wt2',
  },
  {
    group: {
      questionId: 'b',
      step: 0,
      policyVersion: 0,
      gold: ['x'],
      withToolPrompt: [1, 2],
      withTool: [0, 1].map((index) => rollout({ q: 'b', index, reward: 0 })),
      noTool: [rollout({ q: 'b', index: 0, reward: 1, path: 'no-tool' })],
    },
    label: label('b', 'b.nt0', 'no-tool'),
    advantages: [0, 0],
    rejected: 'b.wt1',
  },
  {
    group: {
      questionId: 'c',
      step: 0,
      policyVersion: 0,
      gold: ['x'],
      withToolPrompt: [1, 2],
      withTool: [rollout({ q: 'c', index: 0, reward: 0 })],
      noTool: [rollout({ q: 'c', index: 0, reward: 0, path: 'no-tool' })],
    },
    label: { ...label('c', 'c.wt0', 'with-tool'), target: null, category: 'both-wrong', wt: false },
    advantages: [0],
    rejected: null,
  },
];

t.test('the batch: pairs by row, weights 1 / pairs per mini-batch, no L_AKBE weights', async (t) => {
  const b = assembleBatch(questions(), { rowKinds: ['dpo-pair'], miniBatchQuestions: 2 });
  t.same(
    b.rowInfo.map((r) => `${r.rolloutId}:${r.context}`),
    [
      'a.wt0:with-tool',
      'a.wt1:with-tool',
      'a.wt2:with-tool',
      'b.wt0:with-tool',
      'b.wt1:with-tool',
      'b.nt0:with-tool',
      'c.wt0:with-tool',
    ],
  );
  t.same(b.dpoPairs, [
    { chosen: 0, rejected: 2, weight: 0.5 },
    { chosen: 5, rejected: 4, weight: 0.5 },
  ]);
  t.same(Array.from(b.akbeWeight), [0, 0, 0, 0, 0, 0, 0], 'L_DPO replaces L_AKBE');
  t.same(Array.from(b.pgWeight), [1, 1, 1, 1, 1, 0, 1], 'the no-tool target is no GRPO row');
  t.same(Array.from(b.recomputeOld), [0, 0, 0, 0, 0, 1, 0]);
  b.refLogp = Float32Array.from([-1, -2, -3, -4, -5, -6, -7]);
  const mb = sliceMiniBatch(b, 0, { padRowsTo: 7 });
  // slot 0: +1 at row 0, -1 at row 2; slot 1: +1 at row 5, -1 at row 4; the rest 0.
  const expected = new Float32Array(49);
  expected[0] = 1;
  expected[2] = -1;
  expected[7 + 5] = 1;
  expected[7 + 4] = -1;
  t.same(Array.from(mb.dpoPairMatrix!), Array.from(expected));
  t.same(Array.from(mb.dpoWeight!), [0.5, 0.5, 0, 0, 0, 0, 0]);
  t.same(Array.from(mb.refLogp!), [-1, -2, -3, -4, -5, -6, 0]);
  const second = sliceMiniBatch(b, 1, { padRowsTo: 7 });
  t.same(Array.from(second.dpoWeight!), [0, 0, 0, 0, 0, 0, 0], 'question c has no pair');
  t.same(Array.from(second.refLogp!), [-7, 0, 0, 0, 0, 0, 0]);
  t.notOk(
    assembleBatch(questions(), { rowKinds: ['akbe-target'], miniBatchQuestions: 2 }).dpoPairs,
    'akbe has no pairs',
  );
  const bad = questions();
  bad[0].rejected = 'a.wt0';
  t.throws(() => assembleBatch(bad, { rowKinds: ['dpo-pair'], miniBatchQuestions: 2 }), {
    name: 'RolloutShapeError',
  });
});

t.test('a training step whose reference is the policy itself: L_DPO = log 2', async (t) => {
  const cfg = TINY_CFG;
  const B = 2;
  const T = 5;
  const ids = [1, 2, 3, 4, 5, 1, 6, 5, 4, 3];
  const lossMask = [0, 1, 1, 1, 0, 1, 1, 0];
  const params = tinyParams(3);
  const rt = await PolicyRuntime.create(cfg, params, { intraOpThreads: 1 });
  const lps = await rt.logprobs([ids.slice(0, T), ids.slice(T)]);
  const ref = lps.map((row, b) => row.reduce((a, lp, i) => a + lp * lossMask[b * (T - 1) + i], 0));
  const trainer = await Trainer.create(cfg, params, {
    batch: B,
    seq: T,
    dpo: true,
    session: { intraOpThreads: 1 },
    hyper: { lambda: 1, dpoBeta: 0.1 },
  });
  const batch = {
    inputIds: ids,
    lossMask,
    oldLogprobs: new Array(B * (T - 1)).fill(0),
    advantages: [0, 0],
    pgWeight: [0, 0],
    dpoPairs: [1, -1, 0, 0],
    dpoWeight: [1, 0],
  };
  await t.rejects(trainer.step(batch), { name: 'TrainBatchShapeError', field: 'refLogp' });
  const m = await trainer.step({ ...batch, refLogp: ref });
  t.ok(Math.abs(m.dpoLoss! - Math.LN2) < 1e-5, `L_DPO ${m.dpoLoss} = log 2`);
  t.ok(Math.abs(m.loss - Math.LN2) < 1e-5, 'the loss is lambda * L_DPO alone');
  t.ok(m.gradNorm > 0, 'and it has a gradient (pushes the chosen up, the rejected down)');
  // One step of descent on L_DPO raises the margin (s_w - ref_w) - (s_l - ref_l) above 0.
  const moved = await PolicyRuntime.create(cfg, trainer.getParams(), { intraOpThreads: 1 });
  const after = (await moved.logprobs([ids.slice(0, T), ids.slice(T)])).map((row, b) =>
    row.reduce((a, lp, i) => a + lp * lossMask[b * (T - 1) + i], 0),
  );
  t.ok(after[0] - ref[0] - (after[1] - ref[1]) > 0, 'the margin grew');
  await trainer.release();
});
