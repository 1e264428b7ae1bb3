/**
 * Issue 24: the loss options a config reaches (config.dualClip, config.logRatioClamp,
 * config.lossAgg), each on a hand-worked batch where it binds, through the ONNX loss graph
 * (src/gpu/losses.ts policyLoss) in float64 onnxruntime. Every expected value is worked out in
 * the comments; clip eps 0.2 throughout.
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { Graph } from '../src/gpu/graph/index.js';
import { type LossOptions, policyLoss } from '../src/gpu/losses.js';
import { validateTrainConfig } from '../src/rl/config.js';

interface Batch {
  B: number;
  L: number;
  tokenLogp: number[];
  oldLogp: number[];
  lossMask: number[];
  advantages: number[];
  pgWeight: number[];
}

/** L_GRPO (pg_loss) of the batch with c = 3, clamp 20 and the given options. */
async function pgLoss(x: Batch, opts: LossOptions): Promise<number> {
  const { B, L } = x;
  const g = new Graph();
  const f = (name: string, shape: number[]) => g.input(name, 'float64', shape);
  const out = policyLoss(
    {
      tokenLogp: f('tok', [B, L]),
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
    opts,
  );
  g.output(out.pgLoss, 'pg_loss');
  const s = await ort.InferenceSession.create(g.serialize());
  const T = (v: number[], dims: number[]) => new ort.Tensor('float64', Float64Array.from(v), dims);
  const r = await s.run({
    tok: T(x.tokenLogp, [B, L]),
    old: T(x.oldLogp, [B, L]),
    mask: T(x.lossMask, [B, L]),
    adv: T(x.advantages, [B]),
    pgw: T(x.pgWeight, [B]),
    akw: T(new Array(B).fill(0), [B]),
    lo: T([0.2], []),
    hi: T([0.2], []),
    c: T([3], []),
    clamp: T([20], []),
    lambda: T([0], []),
  });
  await s.release();
  return (r.pg_loss.data as Float64Array)[0];
}

type Check = { ok(pass: boolean, message: string): void };
const near = (t: Check, got: number, want: number, what: string) =>
  t.ok(Math.abs(got - want) <= 1e-12 * Math.max(1, Math.abs(want)), `${what}: ${got} vs hand-worked ${want}`);

t.test('dual clip: a negative advantage with a large ratio costs at most -c A', async (t) => {
  // One token, A = -1, log pi - log pi_old = ln 5: r = 5.
  //   PPO: max(-A r, -A clip(r, 0.8, 1.2)) = max(5, 1.2) = 5
  //   dual clip c = 3: min(5, -c A) = min(5, 3) = 3 (binds); without it, 5.
  const x = {
    B: 1,
    L: 1,
    tokenLogp: [Math.log(5)],
    oldLogp: [0],
    lossMask: [1],
    advantages: [-1],
    pgWeight: [1],
  };
  near(t, await pgLoss(x, {}), 3, 'dual clip on (the default)');
  near(t, await pgLoss(x, { dualClip: false }), 5, 'dualClip: false');
  // r = 2: PPO max(2, 1.2) = 2 < 3, the dual clip does not bind.
  near(t, await pgLoss({ ...x, tokenLogp: [Math.log(2)] }, {}), 2, 'r = 2: below -c A');
  // A = +1, r = 5: PPO max(-5, -1.2) = -1.2; the dual clip is for A < 0 only (min(-1.2, -3) would give -3).
  near(t, await pgLoss({ ...x, advantages: [1] }, {}), -1.2, 'A > 0: untouched');
});

t.test('log-ratio clamp: a log ratio of 25 is clamped to 20', async (t) => {
  // One token, A = -1, log ratio 25, dual clip off so the ratio itself shows:
  //   clamped r = e^20 = 485165195.4097903: loss max(e^20, 1.2) = e^20
  //   unclamped r = e^25 = 72004899337.38588
  const x = { B: 1, L: 1, tokenLogp: [25], oldLogp: [0], lossMask: [1], advantages: [-1], pgWeight: [1] };
  near(t, await pgLoss(x, { dualClip: false }), 485165195.4097903, 'clamp on (the default)');
  near(t, await pgLoss(x, { dualClip: false, logRatioClamp: false }), 72004899337.38588, 'clamp off');
});

t.test('lossAgg: two sequences of different length give three different numbers', async (t) => {
  // Ratio 1 everywhere (logp = old), so each token's term is -A:
  //   row 0: 1 token,  A = -2 -> term 2 (PPO max(2, 2) = 2; dual clip min(2, 6) = 2)
  //   row 1: 3 tokens, A = +1 -> term -1 each
  //   row 2: an AKBE-only row (pg weight 0, A = 5): in no aggregation
  // token-mean:           (2 - 1 - 1 - 1) / 4 = -0.25
  // seq-mean-token-mean:  (2 / 1 + (-3) / 3) / 2 = 0.5
  // seq-mean-token-sum:   (2 + (-3)) / 2 = -0.5
  const x = {
    B: 3,
    L: 3,
    tokenLogp: [-1, -1, -1, -0.5, -0.7, -0.9, -2, -2, -2],
    oldLogp: [-1, -1, -1, -0.5, -0.7, -0.9, -2, -2, -2],
    lossMask: [1, 0, 0, 1, 1, 1, 1, 1, 1],
    advantages: [-2, 1, 5],
    pgWeight: [1, 1, 0],
  };
  near(t, await pgLoss(x, {}), -0.25, 'default = token-mean');
  near(t, await pgLoss(x, { aggregation: 'token-mean' }), -0.25, 'token-mean');
  near(t, await pgLoss(x, { aggregation: 'seq-mean-token-mean' }), 0.5, 'seq-mean-token-mean');
  near(t, await pgLoss(x, { aggregation: 'seq-mean-token-sum' }), -0.5, 'seq-mean-token-sum');
});

t.test(
  'the config takes the options, their defaults are the old behaviour, and null turns one off',
  async (t) => {
    const d = validateTrainConfig({});
    t.same([d.dualClip, d.logRatioClamp, d.lossAgg], [3, 20, 'token-mean']);
    const off = validateTrainConfig({ dualClip: null, logRatioClamp: null, lossAgg: 'seq-mean-token-sum' });
    t.same([off.dualClip, off.logRatioClamp, off.lossAgg], [null, null, 'seq-mean-token-sum']);
    t.throws(() => validateTrainConfig({ dualClip: 1 }), /config\.dualClip must be a number > 1 or null/);
    t.throws(
      () => validateTrainConfig({ logRatioClamp: 0 }),
      /config\.logRatioClamp must be a number > 0 or null/,
    );
    t.throws(() => validateTrainConfig({ lossAgg: 'seq-mean' }), /config\.lossAgg must be one of/);
  },
);
