/**
 * The chunked lm head of the training graph (src/gpu/lm-head.ts): the op's logprobs and entropy
 * against a plain-JS log-softmax, its recomputing backward against float64 central differences
 * with several chunks (a short last one included), the whole training step chunked vs unchunked
 * (float64 to 1e-12, float32 to 5e-6: see the tolerance's note), and the default that keeps small
 * models on today's unchunked graph to the byte.
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { architecture, type PolicyConfig, parsePolicyConfig } from '../src/gpu/architecture.js';
import type { GPTConfig, Params } from '../src/gpu/config.js';
import { initParams } from '../src/gpu/config.js';
import { chunkedTokenLogprobs, chunkRanges, logitsChunkRows } from '../src/gpu/lm-head.js';
import { buildTrainGraph, HYPER_INPUTS } from '../src/gpu/train-step.js';
import { Rng } from '../src/util/rng.js';
import { gradcheck } from './helpers/gradcheck.js';
import { TINY_LLAMA_JSON, tinyLlamaParams } from './helpers/tiny-llama.js';
import { ONE_BLOCK_CFG } from './helpers/tiny-policy.js';

const [N, D, V] = [7, 5, 6];
const TARGETS = [0, 5, 2, 2, 4, 1, 3];

/** log-softmax rows of h W^T, in plain JS (float64). */
function refLogp(h: number[], w: number[]): number[][] {
  return Array.from({ length: N }, (_, n) => {
    const z = Array.from({ length: V }, (_, v) =>
      Array.from({ length: D }, (_, d) => h[n * D + d] * w[v * D + d]).reduce((a, b) => a + b, 0),
    );
    const m = Math.max(...z);
    const lse = m + Math.log(z.reduce((a, zi) => a + Math.exp(zi - m), 0));
    return z.map((zi) => zi - lse);
  });
}

const headInputs = {
  h: { shape: [N, D] },
  w: { shape: [V, D] },
  t: { shape: [N, 1], dtype: 'int64' as const, values: TARGETS, noGrad: true },
};

t.test('chunk ranges and the default chunk size (hand-worked)', async (t) => {
  t.same(chunkRanges(7, 3), [
    [0, 3],
    [3, 6],
    [6, 7],
  ]);
  t.same(chunkRanges(6, 3), [
    [0, 3],
    [3, 6],
  ]);
  // 64 MiB of float32 [rows, 151,936]: 67,108,864 / 607,744 = 110.4 -> 110 rows.
  t.equal(logitsChunkRows(151_936, 4), 110);
  t.equal(logitsChunkRows(151_936, 8), 55);
  t.equal(logitsChunkRows(11, 4), 1_525_201);
  t.equal(logitsChunkRows(151_936, 4, 32), 32);
  t.throws(() => logitsChunkRows(11, 4, 0), /positive integer/);
});

for (const chunk of [3, 1, N]) {
  t.test(
    `chunked token logprobs, ${chunk} rows a chunk: JS reference and float64 central differences`,
    async (t) => {
      const r = await gradcheck(t, {
        inputs: headInputs,
        build: (x) => chunkedTokenLogprobs(x.h, x.w, x.t, chunk).tokenLogp,
        expect: (x) => refLogp(x.h, x.w).map((row, n) => row[TARGETS[n]]),
        atol: 1e-12,
        rtol: 1e-7,
      });
      t.ok(r.errors.h !== undefined && r.errors.w !== undefined, 'both h and w gradients checked');
    },
  );
}

t.test('chunked entropy = -sum p log p of the JS reference', async (t) => {
  await gradcheck(t, {
    inputs: { h: { shape: [N, D], noGrad: true }, w: { shape: [V, D], noGrad: true }, t: headInputs.t },
    build: (x) => chunkedTokenLogprobs(x.h, x.w, x.t, 3).entropy,
    expect: (x) => refLogp(x.h, x.w).map((row) => -row.reduce((a, l) => a + Math.exp(l) * l, 0)),
    atol: 1e-12,
  });
});

const gpt: GPTConfig = ONE_BLOCK_CFG;
const qwen3 = parsePolicyConfig({ ...TINY_LLAMA_JSON.qwen3, num_hidden_layers: 1 }) as Parameters<
  typeof tinyLlamaParams
>[0];
const MODELS: Array<{ name: string; cfg: PolicyConfig; params: Params }> = [
  { name: 'GPT-2', cfg: gpt, params: initParams(gpt, 3) },
  { name: 'qwen3', cfg: qwen3, params: tinyLlamaParams(qwen3, 3, 0.3) },
];
const [B, T] = [3, 6]; // 15 head rows: chunks of 4 are 4, 4, 4, 3

/** One training step's outputs (metrics, logprobs, unclipped gradients) for a head chunk size. */
async function stepOutputs(cfg: PolicyConfig, params: Params, dtype: 'float32' | 'float64', chunk?: number) {
  const g = buildTrainGraph(cfg, { batch: B, seq: T, dtype, optimizer: 'host', logitsChunk: chunk });
  const session = await ort.InferenceSession.create(g.serialize(), { intraOpNumThreads: 1 });
  const F = dtype === 'float64' ? Float64Array : Float32Array;
  const tensor = (v: ArrayLike<number>, dims: number[]) => new ort.Tensor(dtype, F.from(v), dims);
  const rng = new Rng(7);
  const vocab = architecture(cfg).vocabSize;
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor(
      'int64',
      BigInt64Array.from({ length: B * T }, () => BigInt(rng.int(vocab))),
      [B, T],
    ),
    loss_mask: tensor([1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0], [B, T - 1]),
    old_logprobs: tensor(
      Array.from({ length: B * (T - 1) }, () => -Math.log(vocab) + 0.3 * rng.normal()),
      [B, T - 1],
    ),
    advantages: tensor([1.1, -0.6, 0.3], [B]),
    pg_weight: tensor([1, 1, 0], [B]),
    akbe_weight: tensor([0, 0, 0.2], [B]),
    ...Object.fromEntries(HYPER_INPUTS.filter((n) => n !== 'adam_eps').map((n) => [n, tensor([0.2], [])])),
  };
  for (const [name, v] of params)
    feeds[name] = tensor(
      v,
      architecture(cfg)
        .paramShapes()
        .find((s) => s.name === name)!.shape,
    );
  const out = await session.run(feeds);
  await session.release();
  // The tied embedding's gradient: chunked, its rows scattered straight into the head's running
  // sum (fuseTiedGradient); unchunked, autodiff's Sum of the two parts.
  const tied = g.outputs.find((o) => o.name === `grad.${architecture(cfg).paramShapes()[0].name}`)!;
  return {
    producers: [tied.producer?.opType, tied.producer?.inputs[0]?.producer?.opType],
    bytes: g.serialize(),
    out: Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Array.from(v.data as Float64Array)])),
  };
}

/** Worst |a - b| over each output, relative to the output's largest magnitude. */
function worstRelative(a: Record<string, number[]>, b: Record<string, number[]>): [string, number] {
  let worst: [string, number] = ['', 0];
  for (const [k, av] of Object.entries(a)) {
    const bv = b[k];
    const scale = Math.max(...av.map(Math.abs), 1e-30);
    const err = Math.max(...av.map((x, i) => Math.abs(x - bv[i]))) / scale;
    if (!(err <= worst[1])) worst = [k, err];
  }
  return worst;
}

for (const { name, cfg, params } of MODELS) {
  t.test(`${name}: the training step chunked (4 rows) = unchunked`, async (t) => {
    const full64 = await stepOutputs(cfg, params, 'float64');
    const chunked64 = await stepOutputs(cfg, params, 'float64', 4);
    t.same(Object.keys(chunked64.out).sort(), Object.keys(full64.out).sort(), 'the same outputs');
    t.ok(
      Object.keys(full64.out).some((k) => k.startsWith('grad.')),
      'gradients compared',
    );
    // float64: only the summation order differs (chunked Gemm vs one MatMul, softmax vs exp(logp)).
    const [k64, e64] = worstRelative(full64.out, chunked64.out);
    t.ok(e64 <= 1e-12, `float64 worst relative difference ${e64.toExponential(2)} (${k64}) <= 1e-12`);
    // float32: the same reorderings, each ~1 ulp (6e-8) per op, compounded through a few dozen ops
    // of the backward and divided by the largest value of each output (small entries carry it).
    const full32 = await stepOutputs(cfg, params, 'float32');
    const chunked32 = await stepOutputs(cfg, params, 'float32', 4);
    const [k32, e32] = worstRelative(full32.out, chunked32.out);
    t.ok(e32 <= 5e-6, `float32 worst relative difference ${e32.toExponential(2)} (${k32}) <= 5e-6`);
    // The default at 15 rows and a tiny vocabulary is one chunk: today's graph, to the byte.
    const atRows = await stepOutputs(cfg, params, 'float32', B * (T - 1));
    t.ok(
      Buffer.from(atRows.bytes).equals(Buffer.from(full32.bytes)),
      'logitsChunk >= rows: the default graph',
    );
    t.notOk(Buffer.from(chunked32.bytes).equals(Buffer.from(full32.bytes)), 'logitsChunk 4: another graph');
    t.same(atRows.out, full32.out, 'and the same outputs to the bit');
    t.same(
      chunked64.producers,
      ['ScatterElements', 'Gemm'],
      'chunked: embedding rows scattered into the head sum',
    );
    t.same(full64.producers[0], 'Sum', 'unchunked: the Sum of both parts, as before');
  });
}
