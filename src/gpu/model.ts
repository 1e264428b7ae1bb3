/**
 * The GPT-2 policy as ONNX graphs, read top-down: LayerNorm, Linear, attention, MLP, block, GPT.
 * The graphs ORT runs (forward logprobs, KV-cache decode) are built from `gptHidden` by
 * policy-graphs.ts, the same way for every architecture. Architecture as GPT-2
 * (https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf):
 * pre-LayerNorm blocks, learned positions, tanh-GELU, LM head tied to wte, LayerNorm eps from
 * the config. Parameters are graph INPUTS named as in `gpt2ParamShapes` (src/gpu/config.ts), so
 * one ONNX model serves every policy version.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S (or the full sequence), D n_embd,
 * H n_head, hd = D / H, V vocab_size. Masks are bool, true = may attend.
 */
import type { GPTConfig } from './config.js';
import { ops, type Tensor } from './graph/index.js';
import {
  attentionMask,
  embed,
  type HiddenStates,
  type KV,
  MASKED_SCORE,
  type ModelInputs,
  type ParamTensors,
  param,
  throughLayers,
} from './model-inputs.js';

const { add, mul, matmul, reshape, transpose, softmax, where } = ops;

// ---- LayerNorm ----

function layerNorm(x: Tensor, p: ParamTensors, prefix: string, cfg: GPTConfig): Tensor {
  return ops.layerNorm(x, param(p, `${prefix}.weight`), param(p, `${prefix}.bias`), cfg.layer_norm_epsilon);
}

// ---- Linear (HF Conv1D: weight [in, out], so y = x @ W + b) ----

function linear(x: Tensor, p: ParamTensors, prefix: string): Tensor {
  return add(matmul(x, param(p, `${prefix}.weight`)), param(p, `${prefix}.bias`));
}

// ---- causal self-attention ----

function attention(x: Tensor, p: ParamTensors, prefix: string, cfg: GPTConfig, mask: Tensor, past?: KV) {
  const D = cfg.n_embd;
  const H = cfg.n_head;
  const hd = D / H;
  const qkv = linear(x, p, `${prefix}.c_attn`); // [B, S, 3D]
  const [q0, k0, v0] = ops.split(qkv, 2, [D, D, D]); // each [B, S, D]
  const heads = (t: Tensor) => transpose(reshape(t, [0, 0, H, hd]), [0, 2, 1, 3]); // [B, H, S, hd]
  const q = mul(heads(q0), 1 / Math.sqrt(hd)); // scale q (S x hd) rather than the scores (S x T)
  let k = heads(k0);
  let v = heads(v0);
  if (past) {
    k = ops.concat([past.key, k], 2); // [B, H, T, hd]
    v = ops.concat([past.value, v], 2); // [B, H, T, hd]
  }
  const scores = matmul(q, ops.transposeLast2(k)); // [B, H, S, T]
  const att = softmax(where(mask, scores, MASKED_SCORE)); // [B, H, S, T]
  const y = reshape(transpose(matmul(att, v), [0, 2, 1, 3]), [0, 0, D]); // [B, S, D]
  return { y: linear(y, p, `${prefix}.c_proj`), present: { key: k, value: v } };
}

// ---- MLP ----

function mlp(x: Tensor, p: ParamTensors, prefix: string): Tensor {
  return linear(ops.gelu(linear(x, p, `${prefix}.c_fc`), 'tanh'), p, `${prefix}.c_proj`); // [B, S, D]
}

// ---- block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)) ----

function block(x: Tensor, p: ParamTensors, i: number, cfg: GPTConfig, mask: Tensor, past?: KV) {
  const h = `h.${i}`;
  const a = attention(layerNorm(x, p, `${h}.ln_1`, cfg), p, `${h}.attn`, cfg, mask, past);
  x = add(x, a.y); // [B, S, D]
  x = add(x, mlp(layerNorm(x, p, `${h}.ln_2`, cfg), p, `${h}.mlp`)); // [B, S, D]
  return { x, present: a.present };
}

// ---- GPT ----

/** Final hidden states [B, S, D] (after ln_f) and each layer's grown cache [B, H, T, hd]. */
export function gptHidden(cfg: GPTConfig, p: ParamTensors, inp: ModelInputs): HiddenStates {
  const ids = inp.inputIds;
  const S = ids.shape[1];
  const tok = embed(p, 'wte.weight', ids); // [B, S, D]
  const pos = inp.positionIds
    ? embed(p, 'wpe.weight', inp.positionIds) // [B, S, D]
    : typeof S === 'number'
      ? ops.slice(param(p, 'wpe.weight'), [0], [S], [0]) // [S, D]
      : embed(p, 'wpe.weight', ops.range(ids.graph.scalar(0, 'int64'), ops.dimOf(ids, 1))); // [S, D]
  const mask = attentionMask(ids, inp.attentionMask, inp.past?.[0]?.key);
  const out = throughLayers(add(tok, pos), cfg.n_layer, (x, i) => block(x, p, i, cfg, mask, inp.past?.[i]));
  return { hidden: layerNorm(out.x, p, 'ln_f', cfg), presents: out.presents };
}

/** Tied LM head [V, D]: logits = h @ wte^T. */
export function gptHeadWeight(p: ParamTensors): Tensor {
  return param(p, 'wte.weight');
}
