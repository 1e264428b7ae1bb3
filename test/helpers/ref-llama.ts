/**
 * A plain float64 forward pass of the Llama family (LlamaForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM), written from transformers' modeling files with scalar loops and
 * independent of the ONNX graphs: pre-RMSNorm, rotary positions in the rotate_half form
 * (pairs i and i + hd/2), query head h reading key/value head floor(h / G), SiLU-gated MLP,
 * optional biases, Qwen3's per-head q_norm/k_norm before the rotation, tied or untied head.
 */
import type { Params } from '../../src/gpu/config.js';
import type { LlamaConfig } from '../../src/gpu/llama-config.js';

type Vec = Float64Array;

function rms(x: ArrayLike<number>, w: Float32Array, eps: number): Vec {
  let ss = 0;
  for (let i = 0; i < x.length; i++) ss += x[i] * x[i];
  const inv = 1 / Math.sqrt(ss / x.length + eps);
  return Float64Array.from(x, (v, i) => v * inv * w[i]);
}

/** W [out, in] (nn.Linear layout) times x [in], plus bias [out] when given. */
function linear(x: Vec, W: Float32Array, nOut: number, bias?: Float32Array): Vec {
  const nIn = x.length;
  const out = new Float64Array(nOut);
  for (let o = 0; o < nOut; o++) {
    let s = bias ? bias[o] : 0;
    for (let i = 0; i < nIn; i++) s += W[o * nIn + i] * x[i];
    out[o] = s;
  }
  return out;
}

/** Rotates each head's pairs (i, i + hd/2) by position * theta^(-2i / hd). */
function rope(x: Vec, nHeads: number, hd: number, pos: number, theta: number): Vec {
  const out = new Float64Array(x.length);
  for (let h = 0; h < nHeads; h++) {
    for (let i = 0; i < hd / 2; i++) {
      const angle = pos * theta ** (-(2 * i) / hd);
      const a = x[h * hd + i];
      const b = x[h * hd + i + hd / 2];
      out[h * hd + i] = a * Math.cos(angle) - b * Math.sin(angle);
      out[h * hd + i + hd / 2] = b * Math.cos(angle) + a * Math.sin(angle);
    }
  }
  return out;
}

/** Logits [T][V] for one sequence; `positions` default 0..T-1. */
export function refLlamaLogits(cfg: LlamaConfig, params: Params, ids: number[], positions?: number[]): Vec[] {
  const { hidden_size: D, num_attention_heads: H, num_key_value_heads: K, head_dim: hd } = cfg;
  const I = cfg.intermediate_size;
  const eps = cfg.rms_norm_eps;
  const G = H / K;
  const p = (n: string) => {
    const v = params.get(n);
    if (!v) throw new Error(`ref-llama: missing ${n}`);
    return v;
  };
  const opt = (n: string) => params.get(n);
  const emb = p('model.embed_tokens.weight');
  let h: Vec[] = ids.map((id) => Float64Array.from(emb.subarray(id * D, (id + 1) * D)));
  const pos = positions ?? ids.map((_, t) => t);
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const a = `model.layers.${l}.self_attn`;
    const qs: Vec[] = [];
    const ks: Vec[] = [];
    const vs: Vec[] = [];
    for (let t = 0; t < h.length; t++) {
      const x = rms(h[t], p(`model.layers.${l}.input_layernorm.weight`), eps);
      let q = linear(x, p(`${a}.q_proj.weight`), H * hd, opt(`${a}.q_proj.bias`));
      let k = linear(x, p(`${a}.k_proj.weight`), K * hd, opt(`${a}.k_proj.bias`));
      const v = linear(x, p(`${a}.v_proj.weight`), K * hd, opt(`${a}.v_proj.bias`));
      if (cfg.model_type === 'qwen3') {
        const perHead = (y: Vec, n: number, w: Float32Array) => {
          const out = new Float64Array(y.length);
          for (let j = 0; j < n; j++) out.set(rms(y.subarray(j * hd, (j + 1) * hd), w, eps), j * hd);
          return out;
        };
        q = perHead(q, H, p(`${a}.q_norm.weight`));
        k = perHead(k, K, p(`${a}.k_norm.weight`));
      }
      qs.push(rope(q, H, hd, pos[t], cfg.rope_theta));
      ks.push(rope(k, K, hd, pos[t], cfg.rope_theta));
      vs.push(v);
    }
    const next: Vec[] = [];
    for (let t = 0; t < h.length; t++) {
      const y = new Float64Array(H * hd);
      for (let head = 0; head < H; head++) {
        const kv = Math.floor(head / G);
        const scores = [];
        for (let s = 0; s <= t; s++) {
          let dot = 0;
          for (let i = 0; i < hd; i++) dot += qs[t][head * hd + i] * ks[s][kv * hd + i];
          scores.push(dot / Math.sqrt(hd));
        }
        const m = Math.max(...scores);
        const e = scores.map((sc) => Math.exp(sc - m));
        const z = e.reduce((x, w) => x + w, 0);
        for (let s = 0; s <= t; s++)
          for (let i = 0; i < hd; i++) y[head * hd + i] += (e[s] / z) * vs[s][kv * hd + i];
      }
      const r = Float64Array.from(h[t]);
      const o = linear(y, p(`${a}.o_proj.weight`), D, opt(`${a}.o_proj.bias`));
      for (let i = 0; i < D; i++) r[i] += o[i];
      const mp = `model.layers.${l}.mlp`;
      const x2 = rms(r, p(`model.layers.${l}.post_attention_layernorm.weight`), eps);
      const gate = linear(x2, p(`${mp}.gate_proj.weight`), I, opt(`${mp}.gate_proj.bias`));
      const up = linear(x2, p(`${mp}.up_proj.weight`), I, opt(`${mp}.up_proj.bias`));
      const act = gate.map((gv, i) => (gv / (1 + Math.exp(-gv))) * up[i]);
      const down = linear(act, p(`${mp}.down_proj.weight`), D, opt(`${mp}.down_proj.bias`));
      for (let i = 0; i < D; i++) r[i] += down[i];
      next.push(r);
    }
    h = next;
  }
  const head = cfg.tie_word_embeddings ? emb : p('lm_head.weight');
  return h.map((x) => linear(rms(x, p('model.norm.weight'), eps), head, cfg.vocab_size));
}

/** log p(x_t | x_<t) for t = 1..T-1 from the reference logits. */
export function refLlamaLogprobs(cfg: LlamaConfig, params: Params, ids: number[]): number[] {
  const logits = refLlamaLogits(cfg, params, ids);
  return ids.slice(1).map((id, t) => {
    const row = logits[t];
    const m = Math.max(...row);
    const z = row.reduce((s, v) => s + Math.exp(v - m), 0);
    return row[id] - m - Math.log(z);
  });
}
