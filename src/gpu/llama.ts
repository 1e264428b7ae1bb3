/**
 * The Llama family (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM) as ONNX graphs, read
 * top-down: RMSNorm, Linear, rotary embeddings, grouped-query attention, SwiGLU MLP, decoder
 * layer, model, then the cache-in-place decode step. Architecture as transformers'
 * `modeling_llama.py` / `modeling_qwen2.py` / `modeling_qwen3.py`: pre-RMSNorm layers, rotary
 * positions (rotate_half form), K key/value heads shared by G = H / K query heads each, SiLU-gated
 * MLP, optional biases and Qwen3's per-head q_norm/k_norm before the rotation (llama-config.ts).
 * Parameters are graph inputs named as in `llamaParamShapes`.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S, D hidden_size, H query heads,
 * K key/value heads, G = H / K, hd head_dim, I intermediate_size, V vocab_size.
 */
import { Graph, ops, type Tensor } from './graph/index.js';
import { type LlamaConfig, llamaLayout, llamaParamShapes } from './llama-config.js';
import {
  attentionMask,
  declareParamInputs,
  defaultPositions,
  embed,
  type HiddenStates,
  type KV,
  MASKED_SCORE,
  type ModelInputs,
  type ParamTensors,
  param,
  throughLayers,
  type WeightsDtype,
} from './model-inputs.js';

const { add, mul, div, matmul, reshape, transpose, softmax, where } = ops;

// ---- RMSNorm: x / sqrt(mean(x^2) + eps) * w over the last axis ----

function rmsNorm(x: Tensor, w: Tensor, eps: number): Tensor {
  const ms = ops.reduceMean(mul(x, x), [-1], true); // [..., 1]
  return mul(div(x, ops.sqrt(add(ms, eps))), w);
}

// ---- Linear (nn.Linear: weight [out, in], so y = x @ W^T + b) ----

function linear(x: Tensor, p: ParamTensors, prefix: string, bias: boolean): Tensor {
  const y = matmul(x, transpose(param(p, `${prefix}.weight`), [1, 0]));
  return bias ? add(y, param(p, `${prefix}.bias`)) : y;
}

// ---- rotary embeddings ----

/**
 * cos and sin of position * inv_freq, inv_freq_i = theta^(-2i / hd), duplicated to hd as
 * transformers does (cat(freqs, freqs)): [B, S, 1, hd] from ids [B, S], or [S, 1, hd] from [S].
 */
function rotaryTables(cfg: LlamaConfig, positions: Tensor, dtype: Tensor['dtype']) {
  const hd = cfg.head_dim;
  const g = positions.graph;
  const invFreq = Array.from({ length: hd / 2 }, (_, i) => cfg.rope_theta ** (-(2 * i) / hd));
  const freqs = mul(
    ops.unsqueeze(ops.cast(positions, dtype), [-1]), // [..., S, 1]
    g.constant(invFreq, dtype, [hd / 2]),
  ); // [..., S, hd/2]
  const angles = ops.unsqueeze(ops.concat([freqs, freqs], -1), [-2]); // [..., S, 1, hd]
  return { cos: ops.cos(angles), sin: ops.sin(angles) };
}

/** x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]; x [B, S, n, hd]. */
function rotate(x: Tensor, rot: { cos: Tensor; sin: Tensor }, hd: number): Tensor {
  const [x1, x2] = ops.split(x, -1, [hd / 2, hd / 2]); // each [B, S, n, hd/2]
  const half = ops.concat([ops.neg(x2), x1], -1); // [B, S, n, hd]
  return add(mul(x, rot.cos), mul(half, rot.sin));
}

// ---- grouped-query attention ----

/** q, k, v of the new tokens, normed (Qwen3) and rotated: q [B, K, G, S, hd], k and v [B, K, S, hd]. */
function projectQKV(x: Tensor, p: ParamTensors, prefix: string, cfg: LlamaConfig, rot: RotaryTables) {
  const { num_attention_heads: H, num_key_value_heads: K, head_dim: hd } = cfg;
  const lay = llamaLayout(cfg);
  let q = reshape(linear(x, p, `${prefix}.q_proj`, lay.qkvBias), [0, 0, H, hd]); // [B, S, H, hd]
  let k = reshape(linear(x, p, `${prefix}.k_proj`, lay.qkvBias), [0, 0, K, hd]); // [B, S, K, hd]
  const v = reshape(linear(x, p, `${prefix}.v_proj`, lay.qkvBias), [0, 0, K, hd]); // [B, S, K, hd]
  if (lay.qkNorm) {
    q = rmsNorm(q, param(p, `${prefix}.q_norm.weight`), cfg.rms_norm_eps);
    k = rmsNorm(k, param(p, `${prefix}.k_norm.weight`), cfg.rms_norm_eps);
  }
  q = mul(rotate(q, rot, hd), 1 / Math.sqrt(hd)); // scale q (S x hd) rather than the scores (S x T)
  k = rotate(k, rot, hd);
  // Query head h uses key/value head floor(h / G): split H as (K, G).
  const qg = transpose(reshape(q, [0, 0, K, H / K, hd]), [0, 2, 3, 1, 4]); // [B, K, G, S, hd]
  const toHeads = (t: Tensor) => transpose(t, [0, 2, 1, 3]); // [B, K, S, hd]
  return { q: qg, k: toHeads(k), v: toHeads(v) };
}

/** The G query heads of a group back to one row per token: [B, K, G, S, hd] -> [B, S, H hd]. */
function mergeHeads(y: Tensor, cfg: LlamaConfig): Tensor {
  return reshape(transpose(y, [0, 3, 1, 2, 4]), [0, 0, cfg.num_attention_heads * cfg.head_dim]);
}

type RotaryTables = { cos: Tensor; sin: Tensor };

function attention(
  x: Tensor,
  p: ParamTensors,
  prefix: string,
  cfg: LlamaConfig,
  mask: Tensor,
  rot: RotaryTables,
  past?: KV,
) {
  const { q, k: kNew, v: vNew } = projectQKV(x, p, prefix, cfg, rot);
  const k = past ? ops.concat([past.key, kNew], 2) : kNew; // [B, K, T, hd]
  const v = past ? ops.concat([past.value, vNew], 2) : vNew; // [B, K, T, hd]
  // One [K] batch of products: the G query heads of a group share their key/value head unrepeated.
  const scores = matmul(q, ops.unsqueeze(ops.transposeLast2(k), [2])); // [B, K, G, S, T]
  const att = softmax(where(mask, scores, MASKED_SCORE)); // [B, K, G, S, T]
  const y = matmul(att, ops.unsqueeze(v, [2])); // [B, K, G, S, hd]
  const out = linear(mergeHeads(y, cfg), p, `${prefix}.o_proj`, llamaLayout(cfg).oBias); // [B, S, D]
  return { y: out, present: { key: k, value: v } };
}

// ---- SwiGLU MLP: down(silu(gate(x)) * up(x)) ----

function mlp(x: Tensor, p: ParamTensors, prefix: string, cfg: LlamaConfig): Tensor {
  const bias = llamaLayout(cfg).mlpBias;
  const gate = linear(x, p, `${prefix}.gate_proj`, bias); // [B, S, I]
  const up = linear(x, p, `${prefix}.up_proj`, bias); // [B, S, I]
  return linear(mul(mul(gate, ops.sigmoid(gate)), up), p, `${prefix}.down_proj`, bias); // [B, S, D]
}

// ---- decoder layer: x = x + attn(norm(x)); x = x + mlp(norm(x)) ----

function layer(
  x: Tensor,
  p: ParamTensors,
  i: number,
  cfg: LlamaConfig,
  mask: Tensor,
  rot: RotaryTables,
  past?: KV,
) {
  const l = `model.layers.${i}`;
  const eps = cfg.rms_norm_eps;
  const a = attention(
    rmsNorm(x, param(p, `${l}.input_layernorm.weight`), eps),
    p,
    `${l}.self_attn`,
    cfg,
    mask,
    rot,
    past,
  );
  x = add(x, a.y); // [B, S, D]
  x = add(x, mlp(rmsNorm(x, param(p, `${l}.post_attention_layernorm.weight`), eps), p, `${l}.mlp`, cfg));
  return { x, present: a.present };
}

// ---- model ----

/** Final hidden states [B, S, D] (after model.norm) and each layer's grown cache [B, K, T, hd]. */
export function llamaHidden(cfg: LlamaConfig, p: ParamTensors, inp: ModelInputs): HiddenStates {
  const ids = inp.inputIds;
  const x = embed(p, 'model.embed_tokens.weight', ids); // [B, S, D]
  const rot = rotaryTables(cfg, inp.positionIds ?? defaultPositions(ids), x.dtype);
  const mask = attentionMask(ids, inp.attentionMask, inp.past?.[0]?.key); // [S, T] or [B, 1, S, T]
  const mask5 = mask.rank === 4 ? ops.unsqueeze(mask, [1]) : mask; // broadcasts over [B, K, G, S, T]
  const out = throughLayers(x, cfg.num_hidden_layers, (x, i) =>
    layer(x, p, i, cfg, mask5, rot, inp.past?.[i]),
  );
  return { hidden: rmsNorm(out.x, param(p, 'model.norm.weight'), cfg.rms_norm_eps), presents: out.presents };
}

/** LM head [V, D] (logits = h @ W^T): embed_tokens when tied, lm_head otherwise. */
export function llamaHeadWeight(cfg: LlamaConfig, p: ParamTensors): Tensor {
  return param(p, cfg.tie_word_embeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
}

// ---- cache-in-place decode step (see decode-graph.ts for why the cache is not concatenated) ----

/**
 * One token per row over a fixed-capacity cache. Inputs: parameters; `input_ids`, `position_ids`
 * int64 [B, 1]; `cache_mask` bool [B, C]; `cache_key_i` / `cache_value_i` float32 [B, K, C, hd].
 * Outputs: `logits` [B, V]; `new_key_i` / `new_value_i` [B, K, 1, hd].
 *
 *   scores = [ q K_cache^T (masked) | q . k_new ]    [B, K, G, 1, C + 1]
 *   y      = att[..., :C] V_cache + att[..., C:] v_new
 */
export function buildLlamaCachedStepGraph(cfg: LlamaConfig, weights: WeightsDtype = 'float32'): Graph {
  const g = new Graph({ name: `${cfg.model_type}_decode_step_cached` });
  const p = declareParamInputs(g, llamaParamShapes(cfg), 'float32', weights);
  const { num_key_value_heads: K, head_dim: hd, rms_norm_eps: eps } = cfg;
  const ids = g.input('input_ids', 'int64', ['batch', 1]);
  const rot = rotaryTables(cfg, g.input('position_ids', 'int64', ['batch', 1]), 'float32'); // [B, 1, 1, hd]
  const mask = ops.unsqueeze(g.input('cache_mask', 'bool', ['batch', 'capacity']), [1, 2, 3]); // [B, 1, 1, 1, C]
  let x = embed(p, 'model.embed_tokens.weight', ids); // [B, 1, D]
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const l = `model.layers.${i}`;
    const kCache = g.input(`cache_key_${i}`, 'float32', ['batch', K, 'capacity', hd]);
    const vCache = g.input(`cache_value_${i}`, 'float32', ['batch', K, 'capacity', hd]);
    const h = rmsNorm(x, param(p, `${l}.input_layernorm.weight`), eps);
    const { q, k: kNew, v: vNew } = projectQKV(h, p, `${l}.self_attn`, cfg, rot); // q [B, K, G, 1, hd]
    const sCache = where(mask, matmul(q, ops.unsqueeze(ops.transposeLast2(kCache), [2])), MASKED_SCORE); // [B, K, G, 1, C]
    const sNew = ops.reduceSum(mul(q, ops.unsqueeze(kNew, [2])), [4], true); // [B, K, G, 1, 1]
    const att = softmax(ops.concat([sCache, sNew], 4)); // [B, K, G, 1, C + 1]
    const aCache = ops.slice(att, [0], [-1], [4]); // [B, K, G, 1, C]
    const aNew = ops.slice(att, [-1], [Number.MAX_SAFE_INTEGER], [4]); // [B, K, G, 1, 1]
    const y = add(matmul(aCache, ops.unsqueeze(vCache, [2])), mul(aNew, ops.unsqueeze(vNew, [2]))); // [B, K, G, 1, hd]
    x = add(x, linear(mergeHeads(y, cfg), p, `${l}.self_attn.o_proj`, llamaLayout(cfg).oBias)); // [B, 1, D]
    x = add(x, mlp(rmsNorm(x, param(p, `${l}.post_attention_layernorm.weight`), eps), p, `${l}.mlp`, cfg));
    g.output(kNew, `new_key_${i}`);
    g.output(vNew, `new_value_${i}`);
  }
  const last = ops.squeeze(rmsNorm(x, param(p, 'model.norm.weight'), eps), [1]); // [B, D]
  g.output(ops.gemm(last, llamaHeadWeight(cfg, p), null, { transB: true }), 'logits'); // [B, V]
  return g;
}
