/**
 * Training-step throughput of the graph engineer's train graph against a single large MatMul in
 * the same process (the machine's practical peak). Not a test: a measurement.
 *   node --loader @isaacs/ts-node-temp-fork-for-pr-2009/esm scripts/gpu-train-speed.ts [steps] [threads] [vocab]
 * FLOPs per step = 6 N_matmul B T + 12 L T D B T, with N_matmul = 12 L D^2 + V D (tied head as a
 * matmul; embeddings lookups are free), the second term the attention products (full T x T).
 */
import ort from 'onnxruntime-node';
import { countParams, DEFAULT_GPT_CONFIG, type GPTConfig, initParams } from '../src/gpu/config.js';
import { Graph, ops } from '../src/gpu/graph/index.js';
import { Trainer } from '../src/gpu/trainer.js';

const steps = Number(process.argv[2] ?? 5);
const threads = Number(process.argv[3] ?? 0);
const V = Number(process.argv[4] ?? 512);
// The reference model: DEFAULT_GPT_CONFIG is the 4-layer d256 GPT.
const cfg: GPTConfig = { ...DEFAULT_GPT_CONFIG, vocab_size: V };
const B = 16;
const T = 256;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sessionCfg = threads ? { intraOpThreads: threads } : {};

/** A session running one n x n MatMul; each call of the returned function times one run (GFLOP/s). */
async function matmulProbe(n: number): Promise<() => Promise<number>> {
  const g = new Graph();
  const a = g.input('a', 'float32', [n, n]);
  const b = g.input('b', 'float32', [n, n]);
  g.output(ops.matmul(a, b), 'c');
  const s = await ort.InferenceSession.create(g.serialize(), {
    graphOptimizationLevel: 'all',
    ...(threads ? { intraOpNumThreads: threads } : {}),
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  });
  const x = new ort.Tensor(
    'float32',
    Float32Array.from({ length: n * n }, (_, i) => (i % 7) - 3),
    [n, n],
  );
  await s.run({ a: x, b: x });
  return async () => {
    const t0 = performance.now();
    await s.run({ a: x, b: x });
    return (2 * n ** 3) / ((performance.now() - t0) / 1000) / 1e9;
  };
}

// Train steps and MatMul runs are interleaved, so both see the same load on a shared machine.
const matmul = await matmulProbe(2048);
const trainer = await Trainer.create(cfg, initParams(cfg, 1), { batch: B, seq: T, session: sessionCfg });
const ids = Array.from({ length: B * T }, (_, i) => (i * 7919) % V);
const batch = {
  inputIds: ids,
  lossMask: new Array(B * (T - 1)).fill(1),
  oldLogprobs: new Array(B * (T - 1)).fill(-Math.log(V)),
  advantages: Array.from({ length: B }, (_, b) => (b % 2 ? 1 : -1)),
};
await trainer.step(batch); // warm-up
const times: number[] = [];
const peaks: number[] = [];
for (let i = 0; i < steps; i++) {
  peaks.push(await matmul());
  times.push((await trainer.step(batch)).ms / 1000);
}
const { n_layer: L, n_embd: D } = cfg;
const flops = 6 * (12 * L * D * D + V * D) * B * T + 12 * L * T * D * B * T;
const sec = median(times);
const ratios = times.map((t, i) => flops / t / 1e9 / peaks[i]);
console.log(
  JSON.stringify({
    params: countParams(cfg),
    vocab: V,
    batch: B,
    seq: T,
    threads: threads || 'ort-default',
    sessionCreateMs: Math.round(trainer.createMs),
    stepSecMedian: +sec.toFixed(4),
    stepTimes: times.map((x) => +x.toFixed(3)),
    tokensPerSec: Math.round((B * T) / sec),
    gflopPerStep: +(flops / 1e9).toFixed(2),
    trainGflops: +(flops / sec / 1e9).toFixed(1),
    matmulGflopsMedian: +median(peaks).toFixed(1),
    ratioMedian: +median(ratios).toFixed(3),
    ratios: ratios.map((r) => +r.toFixed(2)),
  }),
);
await trainer.release();
