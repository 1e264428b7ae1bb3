/**
 * The GRPO + AKBE loss graph against the plain-TypeScript reference (test/helpers/reference-loss.ts):
 * loss parts, metrics and d loss / d logp, on random inputs that hit every regime (masked tokens,
 * ratios clipped low and high, dual clip), for both GRPO aggregations, both AKBE forms and both
 * AKBE aggregations (row weights from src/rl/batch.ts).
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { Graph, gradients } from '../src/gpu/graph/index.js';
import { policyLoss } from '../src/gpu/losses.js';
import { akbeRowWeights } from '../src/rl/batch.js';
import type { AkbeAggregation } from '../src/rl/losses.js';
import { Rng } from '../src/util/rng.js';
import { AGGREGATIONS, AKBE_LOSS_FORMS } from './helpers/loss-forms.js';
import { type ReferenceLossInput, referenceLoss } from './helpers/reference-loss.js';

const B = 8;
const L = 12;

/** Rows 1, 4, 5 and 7 are AKBE targets (1 and 4 also GRPO samples; 5 is fully masked). */
const TARGET_ROWS = [1, 4, 5, 7];

function randomInput(
  seed: number,
  akbeAggregation: AkbeAggregation,
): Omit<ReferenceLossInput, 'aggregation' | 'akbeLoss'> {
  const rng = new Rng(seed);
  const n = B * L;
  const tokenLogp = Array.from({ length: n }, () => -3 * rng.float() - 0.01);
  // log-ratios in [-1.6, 1.6]: below 1 - eps, inside, above 1 + eps, and above c = 3 (ln 3 = 1.1)
  const oldLogp = tokenLogp.map((lp) => lp - (rng.float() * 3.2 - 1.6));
  const lossMask = Array.from({ length: n }, (): number => (rng.float() < 0.75 ? 1 : 0));
  for (let i = 5 * L; i < 6 * L; i++) lossMask[i] = 0; // one fully masked row
  return {
    batch: B,
    len: L,
    tokenLogp,
    oldLogp,
    lossMask,
    advantages: Array.from({ length: B }, (_, b) => (b % 3 === 0 ? -1 : 1) * (0.2 + rng.float())),
    pgWeight: [1, 1, 1, 1, 1, 0, 1, 0],
    akbeWeight: akbeRowWeights(
      Array.from({ length: B }, (_, b) =>
        TARGET_ROWS.includes(b) ? lossMask.slice(b * L, (b + 1) * L).reduce((a, m) => a + m, 0) : 0,
      ),
      akbeAggregation,
    ),
    clipEpsLow: 0.2,
    clipEpsHigh: 0.28,
    dualClipC: 3,
    ratioClamp: 1.5, // a few log-ratios exceed it too
    lambda: 0.3,
  };
}

async function runGraph(x: ReferenceLossInput) {
  const g = new Graph();
  const f = (name: string, shape: number[]) => g.input(name, 'float64', shape);
  const tokenLogp = f('logp', [B, L]);
  const out = policyLoss(
    {
      tokenLogp,
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
    { aggregation: x.aggregation, akbeLoss: x.akbeLoss },
  );
  const [grad] = gradients(out.loss, [tokenLogp]);
  g.output(out.loss, 'loss');
  g.output(out.pgLoss, 'pg');
  g.output(out.akbeLoss, 'akbe');
  g.output(out.clipFrac, 'clipfrac');
  g.output(out.approxKl, 'kl');
  g.output(grad, 'grad');
  const s = await ort.InferenceSession.create(g.serialize());
  const T = (v: number[], dims: number[]) => new ort.Tensor('float64', Float64Array.from(v), dims);
  const r = await s.run({
    logp: T(x.tokenLogp, [B, L]),
    old: T(x.oldLogp, [B, L]),
    mask: T(x.lossMask, [B, L]),
    adv: T(x.advantages, [B]),
    pgw: T(x.pgWeight, [B]),
    akw: T(x.akbeWeight, [B]),
    lo: T([x.clipEpsLow], []),
    hi: T([x.clipEpsHigh], []),
    c: T([x.dualClipC], []),
    clamp: T([x.ratioClamp], []),
    lambda: T([x.lambda], []),
  });
  const num = (k: string) => (r[k].data as Float64Array)[0];
  return {
    loss: num('loss'),
    pgLoss: num('pg'),
    akbeLoss: num('akbe'),
    clipFrac: num('clipfrac'),
    approxKl: num('kl'),
    grad: Array.from(r.grad.data as Float64Array),
  };
}

t.test('the random inputs exercise every regime of the clipped loss', async (t) => {
  const x = randomInput(1, 'per-target');
  const regimes = { low: 0, high: 0, dual: 0, clamped: 0 };
  x.tokenLogp.forEach((lp, i) => {
    if (!x.lossMask[i]) return;
    const d = lp - x.oldLogp[i];
    const r = Math.exp(d);
    const a = x.advantages[Math.floor(i / L)];
    if (r < 1 - x.clipEpsLow && a < 0) regimes.low++; // clipped from below (A < 0)
    if (r > 1 + x.clipEpsHigh && a > 0) regimes.high++; // clipped from above (A > 0)
    if (r > x.dualClipC && a < 0) regimes.dual++;
    if (Math.abs(d) > x.ratioClamp) regimes.clamped++;
  });
  for (const [k, v] of Object.entries(regimes)) t.ok(v > 0, `${k}: ${v} tokens`);
});

for (const aggregation of AGGREGATIONS) {
  for (const akbeLoss of AKBE_LOSS_FORMS) {
    t.test(`graph loss and gradient equal the TS reference (${aggregation}, akbe ${akbeLoss})`, async (t) => {
      for (const [seed, akbeAggregation] of [
        [1, 'per-target'],
        [2, 'pooled'],
        [3, 'per-target'],
      ] as const) {
        const x = { ...randomInput(seed, akbeAggregation), aggregation, akbeLoss };
        const ref = referenceLoss(x);
        const got = await runGraph(x);
        for (const k of ['loss', 'pgLoss', 'akbeLoss', 'clipFrac', 'approxKl'] as const) {
          t.ok(
            Math.abs(got[k] - ref[k]) <= 1e-12,
            `seed ${seed} ${k}: graph ${got[k]} vs reference ${ref[k]}`,
          );
        }
        const gerr = Math.max(...got.grad.map((v, i) => Math.abs(v - ref.grad[i])));
        t.ok(gerr <= 1e-12, `seed ${seed} gradient max abs error ${gerr}`);
        t.ok(
          ref.grad.some((v) => v === 0) && ref.grad.some((v) => v !== 0),
          'some tokens pass gradient, some are clipped or masked',
        );
      }
    });
  }
}
