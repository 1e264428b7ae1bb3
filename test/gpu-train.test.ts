/**
 * The training step end to end: the whole GRPO + AKBE loss of a tiny GPT and of tiny Qwen3 /
 * Llama models agrees with central finite differences (float64), AdamW with global-norm clipping matches a plain-TS update, and a
 * tiny model learns a repeated token pattern.
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { architecture, type PolicyConfig, parsePolicyConfig } from '../src/gpu/architecture.js';
import { type GPTConfig, gpt2ParamShapes, initParams, type Params } from '../src/gpu/config.js';
import type { Aggregation, AkbeLossForm } from '../src/gpu/losses.js';
import { buildTrainGraph, HYPER_INPUTS } from '../src/gpu/train-step.js';
import { DEFAULT_TRAIN_HYPER, Trainer } from '../src/gpu/trainer.js';
import { Rng } from '../src/util/rng.js';
import { TINY_LLAMA_JSON, tinyLlamaParams } from './helpers/tiny-llama.js';

const tiny: GPTConfig = {
  vocab_size: 7,
  n_embd: 8,
  n_layer: 1,
  n_head: 2,
  n_positions: 6,
  layer_norm_epsilon: 1e-5,
  activation_function: 'gelu_new',
};
const B = 3;
const T = 5;

function randomParams(cfg: GPTConfig, seed: number, std = 0.3): Params {
  const rng = new Rng(seed);
  return new Map(
    gpt2ParamShapes(cfg).map(({ name, shape }) => {
      const base = name.includes('ln_') && name.endsWith('.weight') ? 1 : 0;
      const n = shape.reduce((a, b) => a * b, 1);
      return [name, Float32Array.from({ length: n }, () => base + std * rng.normal())];
    }),
  );
}

const f64 = (v: ArrayLike<number>, dims: number[]) => new ort.Tensor('float64', Float64Array.from(v), dims);
const HYPER = {
  lr: 0.01,
  beta1: 0.9,
  beta2: 0.95,
  adam_eps: 1e-8,
  weight_decay: 0.1,
  max_grad_norm: 0.5,
  clip_eps_low: 0.2,
  clip_eps_high: 0.2,
  dual_clip_c: 3,
  ratio_clamp: 20,
  lambda: 0.7,
  step: 1,
};

// Tiny Llama-family models: one layer each, so the check stays quick.
const oneLayer = (json: Record<string, unknown>) =>
  parsePolicyConfig({ ...json, num_hidden_layers: 1, vocab_size: 7, max_position_embeddings: 6 });
const MODELS: Array<{ name: string; cfg: PolicyConfig; params: (seed: number) => Params }> = [
  { name: 'GPT-2', cfg: tiny, params: (seed) => randomParams(tiny, seed) },
  ...(['qwen3', 'llama'] as const).map((family) => {
    const cfg = oneLayer(TINY_LLAMA_JSON[family]) as Parameters<typeof tinyLlamaParams>[0];
    return { name: family, cfg, params: (seed: number) => tinyLlamaParams(cfg, seed, 0.3) };
  }),
];

/** A training-step session in float64 with gradient outputs, and feeds for a random batch. */
async function float64Step(model: (typeof MODELS)[number], aggregation: Aggregation, akbeLoss: AkbeLossForm) {
  const g = buildTrainGraph(model.cfg, {
    batch: B,
    seq: T,
    dtype: 'float64',
    aggregation,
    akbeLoss,
    gradOutputs: true,
  });
  const session = await ort.InferenceSession.create(g.serialize());
  const rng = new Rng(11);
  const params = model.params(5);
  const values = new Map<string, number[]>([...params].map(([k, v]) => [k, Array.from(v)]));
  const shapes = architecture(model.cfg).paramShapes();
  const ids = Array.from({ length: B * T }, () => rng.int(architecture(model.cfg).vocabSize));
  const data: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [B, T]),
    loss_mask: f64([0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1], [B, T - 1]),
    advantages: f64([0.8, -1.2, 0.5], [B]),
    pg_weight: f64([1, 1, 0], [B]),
    // Rows 1 (2 tokens) and 2 (3 tokens) are AKBE targets, per-target weights 1 / (2 targets * tokens).
    akbe_weight: f64([0, 1 / 4, 1 / 6], [B]),
    ...Object.fromEntries(HYPER_INPUTS.map((n) => [n, f64([HYPER[n]], [])])),
  };
  for (const { name, shape } of shapes) {
    data[`adam_m.${name}`] = f64(new Float64Array(shape.reduce((a, b) => a * b, 1)), shape);
    data[`adam_v.${name}`] = f64(new Float64Array(shape.reduce((a, b) => a * b, 1)), shape);
  }
  const feeds = () => ({
    ...data,
    ...Object.fromEntries(shapes.map(({ name, shape }) => [name, f64(values.get(name)!, shape)])),
  });
  // Old logprobs near the current ones, so ratios straddle the clip range (not on a kink).
  data.old_logprobs = f64(new Float64Array(B * (T - 1)), [B, T - 1]);
  const lp = (await session.run(feeds())).logprobs.data as Float64Array;
  data.old_logprobs = f64(
    Array.from(lp, (v) => v + (rng.float() - 0.5) * 0.9),
    [B, T - 1],
  );
  return { session, values, feeds, shapes, data };
}

for (const model of MODELS) {
  for (const [aggregation, akbeLoss] of [
    ['token-mean', 'nll'],
    ['seq-mean-token-mean', 'clipped'],
  ] as const) {
    t.test(
      `${model.name} whole training loss: autodiff = central differences in float64 (${aggregation}, ${akbeLoss})`,
      async (t) => {
        const { session, values, feeds, shapes } = await float64Step(model, aggregation, akbeLoss);
        const base = await session.run(feeds());
        const h = 1e-6;
        const pick = new Rng(3);
        let worst = 0;
        let checked = 0;
        // Every parameter tensor, up to 6 seeded elements each (all of them costs a minute).
        for (const { name } of shapes) {
          const v = values.get(name)!;
          const analytic = base[`grad.${name}`].data as Float64Array;
          const idx =
            v.length <= 6 ? v.map((_, i) => i) : Array.from({ length: 6 }, () => pick.int(v.length));
          const numeric: number[] = [];
          for (const i of idx) {
            const orig = v[i];
            v[i] = orig + h;
            const up = (await session.run(feeds())).loss.data[0] as number;
            v[i] = orig - h;
            const down = (await session.run(feeds())).loss.data[0] as number;
            v[i] = orig;
            numeric.push((up - down) / (2 * h));
          }
          const scale = Math.max(...numeric.map(Math.abs), ...Array.from(analytic, Math.abs), 1e-12);
          const err = Math.max(...numeric.map((n, k) => Math.abs(n - analytic[idx[k]]))) / scale;
          worst = Math.max(worst, err);
          checked += idx.length;
          if (err > 1e-6) t.fail(`${name}: relative error ${err}`);
        }
        t.ok(
          worst <= 1e-6,
          `${checked} elements of all ${shapes.length} tensors: worst relative error ${worst.toExponential(2)}`,
        );
        await session.release();
      },
    );
  }
}

/**
 * The tensors AdamW decays, listed by hand (GPT-2 / nanoGPT: the embedding and linear weight
 * matrices; never a bias or a LayerNorm gain), independent of the production rule in train-step.ts.
 */
const DECAYED = new Set([
  'wte.weight',
  'wpe.weight',
  'h.0.attn.c_attn.weight',
  'h.0.attn.c_proj.weight',
  'h.0.mlp.c_fc.weight',
  'h.0.mlp.c_proj.weight',
]);

t.test('AdamW with global-norm clipping matches a plain-TS update over two steps', async (t) => {
  const { session, values, feeds, shapes, data } = await float64Step(MODELS[0], 'token-mean', 'nll');
  t.equal(
    shapes.filter(({ name }) => DECAYED.has(name)).length,
    DECAYED.size,
    'every hand-listed decayed tensor exists',
  );
  const m = new Map(shapes.map(({ name }) => [name, new Array<number>(values.get(name)!.length).fill(0)]));
  const v = new Map(shapes.map(({ name }) => [name, new Array<number>(values.get(name)!.length).fill(0)]));
  for (const step of [1, 2]) {
    data.step = f64([step], []);
    for (const { name, shape } of shapes) {
      data[`adam_m.${name}`] = f64(m.get(name)!, shape);
      data[`adam_v.${name}`] = f64(v.get(name)!, shape);
    }
    const out = await session.run(feeds());
    // Reference: clip by global norm, AdamW (bias-corrected, decoupled decay on matrices only).
    const grads = new Map(
      shapes.map(({ name }) => [name, Array.from(out[`grad.${name}`].data as Float64Array)]),
    );
    const norm = Math.sqrt([...grads.values()].flat().reduce((a, g) => a + g * g, 0));
    t.ok(Math.abs(norm - (out.grad_norm.data[0] as number)) < 1e-12, `step ${step}: grad norm ${norm}`);
    t.ok(norm > HYPER.max_grad_norm, `step ${step} clips (norm above max_grad_norm)`);
    const coef = Math.min(1, HYPER.max_grad_norm / (norm + 1e-6));
    let worst = 0;
    for (const { name } of shapes) {
      const p = values.get(name)!;
      const [mk, vk] = [m.get(name)!, v.get(name)!];
      const got = out[`new.${name}`].data as Float64Array;
      grads.get(name)!.forEach((g0, i) => {
        const g = g0 * coef;
        mk[i] = HYPER.beta1 * mk[i] + (1 - HYPER.beta1) * g;
        vk[i] = HYPER.beta2 * vk[i] + (1 - HYPER.beta2) * g * g;
        const mhat = mk[i] / (1 - HYPER.beta1 ** step);
        const vhat = vk[i] / (1 - HYPER.beta2 ** step);
        const decayed = DECAYED.has(name) ? p[i] * (1 - HYPER.lr * HYPER.weight_decay) : p[i];
        const expected = decayed - (HYPER.lr * mhat) / (Math.sqrt(vhat) + HYPER.adam_eps);
        worst = Math.max(worst, Math.abs(expected - got[i]) / Math.max(Math.abs(expected), 1e-3));
        p[i] = expected;
      });
      const gotM = out[`new_adam_m.${name}`].data as Float64Array;
      const gotV = out[`new_adam_v.${name}`].data as Float64Array;
      worst = Math.max(
        worst,
        ...mk.map((x, i) => Math.abs(x - gotM[i])),
        ...vk.map((x, i) => Math.abs(x - gotV[i])),
      );
    }
    t.ok(worst < 1e-10, `step ${step}: max error ${worst}`);
  }
  await session.release();
});

t.test('Trainer: a tiny model learns a repeated token pattern (loss < 10% of start)', async (t) => {
  const cfg: GPTConfig = { ...tiny, vocab_size: 16, n_embd: 32, n_layer: 2, n_head: 2, n_positions: 16 };
  const Bt = 8;
  const Tt = 16;
  const trainer = await Trainer.create(cfg, initParams(cfg, 1), {
    batch: Bt,
    seq: Tt,
    hyper: { lr: 3e-3, weightDecay: 0, lambda: 1 },
    session: { intraOpThreads: 1 },
  });
  const pattern = [3, 9, 1, 14, 7];
  const rng = new Rng(2);
  const batch = () => {
    const ids: number[] = [];
    for (let b = 0; b < Bt; b++) {
      const off = rng.int(pattern.length);
      for (let i = 0; i < Tt; i++) ids.push(pattern[(off + i) % pattern.length]);
    }
    // Pure AKBE-nll (language modelling) on every token; GRPO weight 0.
    return {
      inputIds: ids,
      lossMask: new Array(Bt * (Tt - 1)).fill(1),
      oldLogprobs: new Array(Bt * (Tt - 1)).fill(0),
      advantages: new Array(Bt).fill(0),
      pgWeight: new Array(Bt).fill(0),
      akbeWeight: new Array(Bt).fill(1 / (Bt * (Tt - 1))), // one token-mean over the batch
    };
  };
  const t0 = performance.now();
  const first = await trainer.step(batch());
  let last = first;
  while (last.step < 300 && last.loss > 0.1 * first.loss) last = await trainer.step(batch());
  const secs = (performance.now() - t0) / 1000;
  t.ok(
    last.loss < 0.1 * first.loss,
    `loss ${first.loss.toFixed(3)} -> ${last.loss.toFixed(3)} in ${last.step} steps`,
  );
  t.ok(secs < 60, `${secs.toFixed(1)} s`);
  t.ok(
    last.entropy < first.entropy,
    `entropy falls ${first.entropy.toFixed(3)} -> ${last.entropy.toFixed(3)}`,
  );
  t.equal(trainer.getOptimizerState().step, last.step);

  // setParams/getParams round trip, and the params actually moved.
  const start = initParams(cfg, 1).get('wte.weight')!;
  const now = trainer.getParams();
  t.ok(
    now.get('wte.weight')!.some((v, i) => v !== start[i]),
    'parameters changed',
  );
  trainer.setParams(initParams(cfg, 1));
  t.same(trainer.getParams().get('wte.weight'), start);
  await trainer.release();
});

t.test(
  'a Trainer runs with the DESIGN.md defaults (eps 0.2, c = 3, lambda 0.05) under its overrides',
  async (t) => {
    const trainer = await Trainer.create(tiny, initParams(tiny, 1), {
      batch: 2,
      seq: 4,
      hyper: { lr: 0.5 },
      session: { intraOpThreads: 1 },
    });
    // Hand-written from DESIGN.md and the torch/verl defaults, not read from DEFAULT_TRAIN_HYPER.
    t.same(trainer.hyper, {
      lr: 0.5,
      beta1: 0.9,
      beta2: 0.999,
      eps: 1e-8,
      weightDecay: 0.01,
      maxGradNorm: 1,
      clipEpsLow: 0.2,
      clipEpsHigh: 0.2,
      dualClipC: 3,
      ratioClamp: 20,
      lambda: 0.05,
      behaviourWeightCap: 5, // AReaL's behav_imp_weight_cap in its example configs
      dpoBeta: 0.1, // Rafailov et al. 2023's usual DPO beta
    });
    t.same(
      DEFAULT_TRAIN_HYPER,
      { ...trainer.hyper, lr: 1e-4 },
      'the defaults are not changed by an override',
    );
    await trainer.release();
  },
);

t.test('Trainer rejects a batch of the wrong shape, naming the field', async (t) => {
  const trainer = await Trainer.create(tiny, initParams(tiny, 1), {
    batch: 2,
    seq: 4,
    session: { intraOpThreads: 1 },
  });
  const ok = {
    inputIds: [1, 2, 3, 4, 1, 2, 3, 4],
    lossMask: [1, 1, 1, 1, 1, 1],
    oldLogprobs: [0, 0, 0, 0, 0, 0],
    advantages: [1, -1],
  };
  await t.rejects(trainer.step({ ...ok, lossMask: [1, 1, 1] }), {
    name: 'TrainBatchShapeError',
    field: 'lossMask',
  });
  await t.rejects(trainer.step({ ...ok, inputIds: [1, 2] }), {
    name: 'TrainBatchShapeError',
    field: 'inputIds',
  });
  const m = await trainer.step(ok);
  t.ok(Number.isFinite(m.loss) && m.step === 1, `a well-shaped batch trains (loss ${m.loss})`);
  await trainer.release();
});
