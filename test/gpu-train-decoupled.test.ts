/**
 * The decoupled PPO objective (AReaL, src/gpu/losses.ts): hand-worked values on a tiny batch
 * (one token over the behaviour-weight cap), the TS reference on random inputs, gradients against
 * float64 finite differences, and exact equality with today's (coupled) loss, in the loss graph
 * and through a whole training step, when the proximal policy is the behaviour policy (eta = 0).
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { initParams } from '../src/gpu/config.js';
import { Graph, gradients, type Tensor } from '../src/gpu/graph/index.js';
import { type AkbeLossForm, policyLoss } from '../src/gpu/losses.js';
import { Trainer } from '../src/gpu/trainer.js';
import { Rng } from '../src/util/rng.js';
import { gradcheck } from './helpers/gradcheck.js';
import { AGGREGATIONS, AKBE_LOSS_FORMS } from './helpers/loss-forms.js';
import { type ReferenceLossInput, referenceLoss } from './helpers/reference-loss.js';

type Input = ReferenceLossInput;

/** The loss graph over float64 inputs; `decoupled` feeds proxLogp and the cap. */
async function runLoss(x: Input, decoupled: boolean) {
  const { batch: B, len: L } = x;
  const g = new Graph();
  const f = (name: string, shape: number[]) => g.input(name, 'float64', shape);
  const tokenLogp = f('logp', [B, L]);
  const out = policyLoss(
    {
      tokenLogp,
      oldLogp: f('old', [B, L]),
      proxLogp: decoupled ? f('prox', [B, L]) : undefined,
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
      behaviourWeightCap: decoupled ? f('cap', []) : undefined,
    },
    { aggregation: x.aggregation, akbeLoss: x.akbeLoss },
  );
  const [grad] = gradients(out.loss, [tokenLogp]);
  for (const [k, v] of Object.entries({ ...out, grad })) if (v) g.output(v as Tensor, k);
  const s = await ort.InferenceSession.create(g.serialize());
  const T = (v: number[], dims: number[]) => new ort.Tensor('float64', Float64Array.from(v), dims);
  const feeds: Record<string, ort.Tensor> = {
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
  };
  if (decoupled) {
    feeds.prox = T(x.proxLogp!, [B, L]);
    feeds.cap = T([x.behaviourWeightCap!], []);
  }
  const r = await s.run(feeds);
  await s.release();
  const num = (k: string) => (r[k].data as Float64Array)[0];
  return {
    loss: num('loss'),
    pgLoss: num('pgLoss'),
    akbeLoss: num('akbeLoss'),
    clipFrac: num('clipFrac'),
    approxKl: num('approxKl'),
    grad: Array.from(r.grad.data as Float64Array),
  };
}

/**
 * Two rows of two tokens, A = +1 and -0.5, cap 2; per token the behaviour weight w = pi_prox /
 * pi_behav and the ratio r = pi_theta / pi_prox:
 *   t0 (A +1):   w 1.5,  r 1.1 (inside)      -> w * -A r         = 1.5 * -1.1        = -1.65
 *   t1 (A +1):   w 0.8,  r 1.5 (clipped 1.2) -> w * -A 1.2       = 0.8 * -1.2        = -0.96
 *   t2 (A -0.5): w 3 > cap                   -> 0 (dropped, still in the token count)
 *   t3 (A -0.5): w 1.25, r 0.9 (inside)      -> w * -A r         = 1.25 * 0.45       = 0.5625
 * L_GRPO (token mean over 4) = (-1.65 - 0.96 + 0 + 0.5625) / 4 = -0.511875.
 * Row 0 is also an AKBE target with row weight 0.5, clipped form (A = +1), lambda 0.1:
 *   L_AKBE = 0.5 * (-1.65 - 0.96) = -1.305;  loss = -0.511875 + 0.1 * -1.305 = -0.642375.
 * d loss / d log pi_theta: t0 (1/4 + 0.1 * 0.5) * 1.5 * -1 * 1.1 = -0.495; t1 clipped 0; t2 dropped
 * 0; t3 1/4 * 1.25 * 0.5 * 0.9 = 0.140625.
 */
function handWorked(): Input {
  const behav = [-1, -2, -0.5, -3];
  const w = [1.5, 0.8, 3, 1.25];
  const r = [1.1, 1.5, 1, 0.9];
  const prox = behav.map((b, i) => b + Math.log(w[i]));
  return {
    batch: 2,
    len: 2,
    tokenLogp: prox.map((p, i) => p + Math.log(r[i])),
    oldLogp: behav,
    proxLogp: prox,
    behaviourWeightCap: 2,
    lossMask: [1, 1, 1, 1],
    advantages: [1, -0.5],
    pgWeight: [1, 1],
    akbeWeight: [0.5, 0],
    clipEpsLow: 0.2,
    clipEpsHigh: 0.2,
    dualClipC: 3,
    ratioClamp: 20,
    lambda: 0.1,
    aggregation: 'token-mean',
    akbeLoss: 'clipped',
  };
}

t.test(
  'the decoupled loss of a tiny batch equals its hand-worked values (one weight over the cap)',
  async (t) => {
    const x = handWorked();
    const close = (got: number, want: number, what: string) =>
      t.ok(Math.abs(got - want) <= 1e-12, `${what}: ${got} vs hand-worked ${want}`);
    for (const [name, got] of [
      ['graph', await runLoss(x, true)],
      ['TS reference', referenceLoss(x)],
    ] as const) {
      close(got.pgLoss, -0.511875, `${name} L_GRPO`);
      close(got.akbeLoss, -1.305, `${name} L_AKBE`);
      close(got.loss, -0.642375, `${name} loss`);
      [-0.495, 0, 0, 0.140625].forEach((g, i) => {
        close(got.grad[i], g, `${name} d loss / d logp[${i}]`);
      });
    }
    // The same tokens in today's loss (ratio against the behaviour policy, no weight) differ.
    const coupled = await runLoss(x, false);
    t.ok(Math.abs(coupled.loss - -0.642375) > 0.1, `the coupled loss ${coupled.loss} is another number`);
  },
);

/** Random inputs hitting every regime (as test/gpu-train-loss.test.ts), with a proximal policy between. */
function randomInput(seed: number, akbeLoss: AkbeLossForm, aggregation: Input['aggregation']): Input {
  const rng = new Rng(seed);
  const B = 6;
  const L = 8;
  const n = B * L;
  const tokenLogp = Array.from({ length: n }, () => -3 * rng.float() - 0.01);
  const proxLogp = tokenLogp.map((lp) => lp - (rng.float() * 3.2 - 1.6));
  // log(pi_prox / pi_behav) in [-1.5, 1.5]: weights 0.22 .. 4.5, some above the cap of 3
  const oldLogp = proxLogp.map((lp) => lp - (rng.float() * 3 - 1.5));
  const lossMask = Array.from({ length: n }, (): number => (rng.float() < 0.8 ? 1 : 0));
  return {
    batch: B,
    len: L,
    tokenLogp,
    oldLogp,
    proxLogp,
    behaviourWeightCap: 3,
    lossMask,
    advantages: Array.from({ length: B }, (_, b) => (b % 3 === 0 ? -1 : 1) * (0.2 + rng.float())),
    pgWeight: [1, 1, 1, 1, 0, 1],
    akbeWeight: [0, 0.05, 0, 0, 0.1, 0],
    clipEpsLow: 0.2,
    clipEpsHigh: 0.28,
    dualClipC: 3,
    ratioClamp: 1.5,
    lambda: 0.3,
    aggregation,
    akbeLoss,
  };
}

t.test('the decoupled graph equals the TS reference on random inputs (every form)', async (t) => {
  for (const aggregation of AGGREGATIONS)
    for (const akbeLoss of AKBE_LOSS_FORMS) {
      const x = randomInput(7, akbeLoss, aggregation);
      const dropped = x.proxLogp!.filter((p, i) => x.lossMask[i] && Math.exp(p - x.oldLogp[i]) > 3).length;
      t.ok(dropped > 0, `${dropped} loss tokens over the cap`);
      const ref = referenceLoss(x);
      const got = await runLoss(x, true);
      for (const k of ['loss', 'pgLoss', 'akbeLoss', 'clipFrac', 'approxKl'] as const)
        t.ok(Math.abs(got[k] - ref[k]) <= 1e-12, `${aggregation}/${akbeLoss} ${k}: ${got[k]} vs ${ref[k]}`);
      const gerr = Math.max(...got.grad.map((v, i) => Math.abs(v - ref.grad[i])));
      t.ok(gerr <= 1e-12, `${aggregation}/${akbeLoss} gradient max abs error ${gerr}`);
    }
});

t.test('the decoupled gradient agrees with float64 finite differences', async (t) => {
  for (const akbeLoss of AKBE_LOSS_FORMS) {
    const x = randomInput(11, akbeLoss, 'token-mean');
    const { batch: B, len: L } = x;
    const fixed = (values: number[], shape: number[]) => ({ shape, values, noGrad: true });
    const res = await gradcheck(t, {
      inputs: {
        logp: { shape: [B, L], values: x.tokenLogp },
        old: fixed(x.oldLogp, [B, L]),
        prox: fixed(x.proxLogp!, [B, L]),
        mask: fixed(x.lossMask, [B, L]),
        adv: fixed(x.advantages, [B]),
        pgw: fixed(x.pgWeight, [B]),
        akw: fixed(x.akbeWeight, [B]),
        cap: fixed([3], []),
      },
      build: (v, g) => {
        const s = (n: number) => g.scalar(n, 'float64');
        return policyLoss(
          {
            tokenLogp: v.logp,
            oldLogp: v.old,
            proxLogp: v.prox,
            lossMask: v.mask,
            advantages: v.adv,
            pgWeight: v.pgw,
            akbeWeight: v.akw,
          },
          {
            clipEpsLow: s(0.2),
            clipEpsHigh: s(0.28),
            dualClipC: s(3),
            ratioClamp: s(1.5),
            lambda: s(0.3),
            behaviourWeightCap: v.cap,
          },
          { akbeLoss },
        ).loss;
      },
      rtol: 1e-6,
    });
    t.ok(res.errors.logp <= 1e-6, `${akbeLoss}: worst relative error ${res.errors.logp.toExponential(2)}`);
  }
});

t.test("with pi_prox = pi_behav (eta = 0) the decoupled loss is today's, bit for bit", async (t) => {
  for (const aggregation of AGGREGATIONS)
    for (const akbeLoss of AKBE_LOSS_FORMS) {
      const x = randomInput(3, akbeLoss, aggregation);
      const same = { ...x, proxLogp: [...x.oldLogp] };
      const [dec, coupled] = [await runLoss(same, true), await runLoss(x, false)];
      for (const k of ['loss', 'pgLoss', 'akbeLoss', 'clipFrac', 'approxKl'] as const)
        t.ok(Object.is(dec[k], coupled[k]), `${aggregation}/${akbeLoss} ${k}: ${dec[k]} vs ${coupled[k]}`);
      t.ok(
        dec.grad.every((g, i) => Object.is(g, coupled.grad[i])),
        `${aggregation}/${akbeLoss}: gradients identical`,
      );
    }
});

t.test("a decoupled training step with pi_prox = pi_behav updates the policy as today's", async (t) => {
  const cfg = {
    vocab_size: 7,
    n_embd: 8,
    n_layer: 1,
    n_head: 2,
    n_positions: 6,
    layer_norm_epsilon: 1e-5,
    activation_function: 'gelu_new' as const,
  };
  const B = 2;
  const T = 5;
  const rng = new Rng(5);
  const batch = {
    inputIds: Array.from({ length: B * T }, () => rng.int(7)),
    lossMask: [0, 1, 1, 1, 0, 0, 1, 1],
    oldLogprobs: Array.from({ length: B * (T - 1) }, () => -1 - rng.float()),
    advantages: [0.7, -1.2],
    akbeWeight: [0.25, 0],
  };
  const opts = { batch: B, seq: T, akbeLoss: 'clipped' as const, session: { intraOpThreads: 1 } };
  const coupled = await Trainer.create(cfg, initParams(cfg, 3), opts);
  const decoupled = await Trainer.create(cfg, initParams(cfg, 3), { ...opts, decoupled: true });
  await t.rejects(decoupled.step(batch), { name: 'TrainBatchShapeError', field: 'proxLogprobs' });
  for (let step = 0; step < 2; step++) {
    const a = await coupled.step(batch);
    const b = await decoupled.step({ ...batch, proxLogprobs: batch.oldLogprobs });
    t.same({ ...b, ms: 0 }, { ...a, ms: 0 }, `step ${step + 1}: the same metrics`);
  }
  const pa = coupled.getParams();
  const pb = decoupled.getParams();
  t.ok(
    [...pa].every(([name, v]) => v.every((x, i) => Object.is(x, pb.get(name)![i]))),
    'the same parameters after two steps',
  );
  // A proximal policy away from the behaviour one changes the update.
  const moved = await decoupled.step({ ...batch, proxLogprobs: batch.oldLogprobs.map((x) => x + 0.3) });
  const again = await coupled.step(batch);
  t.not(moved.loss, again.loss, 'pi_prox != pi_behav gives another loss');
  await coupled.release();
  await decoupled.release();
});
