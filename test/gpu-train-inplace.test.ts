/**
 * The host-side, in-place AdamW (src/gpu/adamw.ts, optimizer 'host', the default) against the
 * graph's optimizer (optimizer 'graph'): the same weights and moments to the bit after several
 * steps on a tiny GPT-2 (with clipping, weight decay and an lr schedule), to 1e-6 on the tiny
 * Llama-family configs; a hand-worked update of one element; and the checkpoint's optimizer state
 * carries between the two modes unchanged.
 */
import t from 'tap';
import { adamwInPlace } from '../src/gpu/adamw.js';
import { parsePolicyConfig } from '../src/gpu/architecture.js';
import { type GPTConfig, initParams, type Params } from '../src/gpu/config.js';
import type { LlamaConfig } from '../src/gpu/llama-config.js';
import { type TrainBatch, Trainer, type TrainerOptions } from '../src/gpu/trainer.js';
import { Rng } from '../src/util/rng.js';
import { TINY_LLAMA_JSON, tinyLlamaParams } from './helpers/tiny-llama.js';
import { ONE_BLOCK_CFG } from './helpers/tiny-policy.js';

const gpt: GPTConfig = ONE_BLOCK_CFG;
const [B, T] = [3, 6];

function batches(vocab: number, seed: number, n: number): TrainBatch[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => ({
    inputIds: Array.from({ length: B * T }, () => rng.int(vocab)),
    lossMask: Array.from({ length: B * (T - 1) }, () => (rng.float() < 0.8 ? 1 : 0)),
    oldLogprobs: Array.from({ length: B * (T - 1) }, () => -Math.log(vocab) + 0.3 * rng.normal()),
    advantages: [1.2, -0.7, 0.4],
    akbeWeight: [0, 0.05, 0],
  }));
}

/** Runs the steps with one optimizer; returns the parameters, moments and the last gradient norm. */
async function train(
  cfg: Parameters<typeof Trainer.create>[0],
  params: Params,
  optimizer: 'host' | 'graph',
  steps: TrainBatch[],
  extra: Partial<TrainerOptions> = {},
) {
  const trainer = await Trainer.create(cfg, params, {
    batch: B,
    seq: T,
    optimizer,
    // A tight clip so the clip factor (< 1) enters the update; decay on, as in runs.
    hyper: { lr: 3e-2, weightDecay: 0.1, maxGradNorm: 0.05 },
    session: { intraOpThreads: 1 },
    ...extra,
  });
  let gradNorm = 0;
  for (const [i, b] of steps.entries()) gradNorm = (await trainer.step(b, { lr: 3e-2 / (i + 1) })).gradNorm;
  const out = { params: trainer.getParams(), opt: trainer.getOptimizerState(), gradNorm };
  await trainer.release();
  return out;
}

/** Largest |a - b| over every tensor of two parameter maps (0 = bit-equal for finite values). */
function maxDiff(a: Params, b: Params): number {
  let worst = 0;
  for (const [name, x] of a) {
    const y = b.get(name)!;
    for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  }
  return worst;
}

const sameBits = (a: Params, b: Params) =>
  [...a].every(([name, x]) => Buffer.from(x.buffer).equals(Buffer.from(b.get(name)!.buffer)));

t.test('one element by hand: p 1, g 0.5, step 1, lr 1e-3, wd 0.01', async (t) => {
  const [p, m, v, g] = [[1], [0], [0], [0.5]].map((x) => Float32Array.from(x));
  // coef 1: s1 = 0.1, s2 = 0.001; step 1: lr / (1 - 0.9) = 1e-2, 1 / sqrt(1 - 0.999) = 31.6227766.
  const s = {
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    s1: 0.1,
    s2: 0.001,
    stepSize: 1e-2,
    invSqrtBc2: 31.6227766,
  };
  adamwInPlace(p, m, v, g, { ...s, keep: 1 - 1e-3 * 0.01 }, true);
  // m = 0.05, v = 0.00025, denom = sqrt(0.00025) 31.6227766 + 1e-8 = 0.50000001,
  // p = 0.99999 - 0.01 (0.05 / 0.50000001) = 0.99899000002.
  t.ok(Math.abs(m[0] - 0.05) < 1e-9, `m ${m[0]}`);
  t.ok(Math.abs(v[0] - 0.00025) < 1e-10, `v ${v[0]}`);
  t.ok(Math.abs(p[0] - 0.99899) < 1e-6, `p ${p[0]}`);
  const q = Float32Array.from([1]);
  adamwInPlace(q, Float32Array.from([0]), Float32Array.from([0]), g, { ...s, keep: 0.99999 }, false);
  t.ok(Math.abs(q[0] - 0.999) < 1e-6, `no decay on biases and norms: p ${q[0]}`);
});

t.test("GPT-2 tiny: 'host' equals 'graph' to the bit after 4 clipped, decayed steps", async (t) => {
  const steps = batches(gpt.vocab_size, 1, 4);
  const host = await train(gpt, initParams(gpt, 3), 'host', steps);
  const graph = await train(gpt, initParams(gpt, 3), 'graph', steps);
  t.ok(host.gradNorm > 0.05, `the clip is active (grad norm ${host.gradNorm})`);
  t.equal(host.opt.step, 4);
  t.ok(maxDiff(host.params, initParams(gpt, 3)) > 1e-3, 'the parameters moved');
  t.ok(sameBits(host.params, graph.params), `parameters (max |d| ${maxDiff(host.params, graph.params)})`);
  t.ok(sameBits(host.opt.m, graph.opt.m), `first moments (max |d| ${maxDiff(host.opt.m, graph.opt.m)})`);
  t.ok(sameBits(host.opt.v, graph.opt.v), `second moments (max |d| ${maxDiff(host.opt.v, graph.opt.v)})`);
});

t.test('float64 trainers: host and graph agree to 1e-15', async (t) => {
  const steps = batches(gpt.vocab_size, 2, 2);
  const host = await train(gpt, initParams(gpt, 4), 'host', steps, { dtype: 'float64' });
  const graph = await train(gpt, initParams(gpt, 4), 'graph', steps, { dtype: 'float64' });
  t.ok(maxDiff(host.params, graph.params) < 1e-15, `${maxDiff(host.params, graph.params)}`);
});

for (const family of ['qwen3', 'llama'] as const) {
  t.test(`${family} tiny (Llama family): 'host' equals 'graph' to 1e-6 after 3 steps`, async (t) => {
    const cfg = parsePolicyConfig(JSON.parse(JSON.stringify(TINY_LLAMA_JSON[family]))) as LlamaConfig;
    const steps = batches(cfg.vocab_size, 5, 3);
    const host = await train(cfg, tinyLlamaParams(cfg, 6, 0.3), 'host', steps);
    const graph = await train(cfg, tinyLlamaParams(cfg, 6, 0.3), 'graph', steps);
    const d = Math.max(maxDiff(host.params, graph.params), maxDiff(host.opt.v, graph.opt.v));
    t.ok(d <= 1e-6, `max |d| ${d}${sameBits(host.params, graph.params) ? ' (bit-equal)' : ''}`);
    t.ok(maxDiff(host.opt.m, graph.opt.m) <= 1e-6, 'first moments');
  });
}

t.test('the optimizer state (what optimizer.safetensors holds) carries across modes', async (t) => {
  const [first, second] = [batches(gpt.vocab_size, 7, 2), batches(gpt.vocab_size, 8, 2)];
  const opts = { batch: B, seq: T, hyper: { lr: 1e-2 }, session: { intraOpThreads: 1 } };
  const a = await Trainer.create(gpt, initParams(gpt, 9), { ...opts, optimizer: 'host' });
  for (const b of first) await a.step(b);
  // Save the host trainer's state, resume it in a graph trainer; continue the host one too.
  const saved = { params: a.getParams(), opt: a.getOptimizerState() };
  const c = await Trainer.create(gpt, saved.params, { ...opts, optimizer: 'graph' });
  c.setOptimizerState(saved.opt);
  for (const b of second) {
    await a.step(b);
    await c.step(b);
  }
  t.equal(c.getOptimizerState().step, 4);
  t.ok(sameBits(a.getParams(), c.getParams()), 'resumed parameters equal to the bit');
  t.ok(sameBits(a.getOptimizerState().v, c.getOptimizerState().v), 'resumed moments equal');
  // setParams / setOptimizerState write into the host trainer's arrays, not aliasing the caller's.
  const mine = initParams(gpt, 9);
  a.setParams(mine);
  a.setOptimizerState(null);
  await a.step(first[0]);
  t.same(mine, initParams(gpt, 9), "the caller's arrays are not updated in place");
  await Promise.all([a.release(), c.release()]);
});
