/**
 * A plain float64 GPT-2 forward pass (pre-LayerNorm, learned positions, tanh-GELU, tied LM head),
 * written from the architecture's definition and independent of the ONNX graphs, so tests can
 * check that the graphs compute the model they claim to.
 */
import type { GPTConfig, Params } from '../../src/gpu/config.js';

type Mat = Float64Array[]; // rows

function layerNorm(x: Float64Array, w: Float32Array, b: Float32Array, eps: number): Float64Array {
  const n = x.length;
  let mean = 0;
  for (const v of x) mean += v;
  mean /= n;
  let vari = 0;
  for (const v of x) vari += (v - mean) ** 2;
  vari /= n;
  const inv = 1 / Math.sqrt(vari + eps);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = (x[i] - mean) * inv * w[i] + b[i];
  return out;
}

/** x [in] @ W [in, out] + bias [out] (Conv1D layout). */
function linear(x: Float64Array, W: Float32Array, bias: Float32Array): Float64Array {
  const nIn = x.length;
  const nOut = bias.length;
  const out = Float64Array.from(bias);
  for (let i = 0; i < nIn; i++) {
    const xi = x[i];
    for (let j = 0; j < nOut; j++) out[j] += xi * W[i * nOut + j];
  }
  return out;
}

const geluNew = (x: number) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));

/** Logits [T][V] for one sequence at positions 0..T-1. */
export function refLogits(cfg: GPTConfig, params: Params, ids: number[]): Mat {
  const { n_embd: D, n_head: H, vocab_size: V } = cfg;
  const hd = D / H;
  const p = (n: string) => {
    const v = params.get(n);
    if (!v) throw new Error(`ref-gpt: missing ${n}`);
    return v;
  };
  const wte = p('wte.weight');
  const wpe = p('wpe.weight');
  let h: Mat = ids.map((id, t) => {
    const row = new Float64Array(D);
    for (let d = 0; d < D; d++) row[d] = wte[id * D + d] + wpe[t * D + d];
    return row;
  });
  for (let l = 0; l < cfg.n_layer; l++) {
    const pre = `h.${l}`;
    const qkv = h.map((x) =>
      linear(
        layerNorm(x, p(`${pre}.ln_1.weight`), p(`${pre}.ln_1.bias`), cfg.layer_norm_epsilon),
        p(`${pre}.attn.c_attn.weight`),
        p(`${pre}.attn.c_attn.bias`),
      ),
    );
    const attnOut = qkv.map((_, t) => {
      const y = new Float64Array(D);
      for (let head = 0; head < H; head++) {
        const q = (s: number, d: number) => qkv[s][head * hd + d];
        const k = (s: number, d: number) => qkv[s][D + head * hd + d];
        const v = (s: number, d: number) => qkv[s][2 * D + head * hd + d];
        const scores = new Float64Array(t + 1);
        let max = -Infinity;
        for (let s = 0; s <= t; s++) {
          let dot = 0;
          for (let d = 0; d < hd; d++) dot += q(t, d) * k(s, d);
          scores[s] = dot / Math.sqrt(hd);
          max = Math.max(max, scores[s]);
        }
        let z = 0;
        for (let s = 0; s <= t; s++) z += scores[s] = Math.exp(scores[s] - max);
        for (let s = 0; s <= t; s++)
          for (let d = 0; d < hd; d++) y[head * hd + d] += (scores[s] / z) * v(s, d);
      }
      return linear(y, p(`${pre}.attn.c_proj.weight`), p(`${pre}.attn.c_proj.bias`));
    });
    h = h.map((x, t) => x.map((v, d) => v + attnOut[t][d]));
    h = h.map((x) => {
      const m = linear(
        layerNorm(x, p(`${pre}.ln_2.weight`), p(`${pre}.ln_2.bias`), cfg.layer_norm_epsilon),
        p(`${pre}.mlp.c_fc.weight`),
        p(`${pre}.mlp.c_fc.bias`),
      ).map(geluNew);
      const o = linear(m, p(`${pre}.mlp.c_proj.weight`), p(`${pre}.mlp.c_proj.bias`));
      return x.map((v, d) => v + o[d]);
    });
  }
  return h.map((x) => {
    const f = layerNorm(x, p('ln_f.weight'), p('ln_f.bias'), cfg.layer_norm_epsilon);
    const logits = new Float64Array(V);
    for (let v = 0; v < V; v++) {
      let dot = 0;
      for (let d = 0; d < D; d++) dot += f[d] * wte[v * D + d];
      logits[v] = dot;
    }
    return logits;
  });
}

function logSoftmaxAt(row: Float64Array, i: number): number {
  let max = -Infinity;
  for (const v of row) max = Math.max(max, v);
  let z = 0;
  for (const v of row) z += Math.exp(v - max);
  return row[i] - max - Math.log(z);
}

/** log p(x_t | x_<t) for t = 1..L-1. */
export function refLogprobs(cfg: GPTConfig, params: Params, ids: number[]): number[] {
  const logits = refLogits(cfg, params, ids);
  return ids.slice(1).map((id, t) => logSoftmaxAt(logits[t], id));
}

/** log softmax of the last position's logits: the next-token distribution after `ids`. */
export function refNextLogprobs(cfg: GPTConfig, params: Params, ids: number[]): number[] {
  const logits = refLogits(cfg, params, ids);
  const last = logits[logits.length - 1];
  return Array.from(last, (_, i) => logSoftmaxAt(last, i));
}
