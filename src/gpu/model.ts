/**
 * The GPT-2 policy as ONNX graphs, read top-down: LayerNorm, Linear, attention, MLP, block, GPT,
 * then the graphs ORT runs (forward logprobs, KV-cache decode). Architecture as GPT-2
 * (https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf):
 * pre-LayerNorm blocks, learned positions, tanh-GELU, LM head tied to wte, LayerNorm eps from
 * the config. Parameters are graph INPUTS named as in `gpt2ParamShapes` (src/gpu/config.ts), so
 * one ONNX model serves every policy version.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S (or the full sequence), D n_embd,
 * H n_head, hd = D / H, V vocab_size. Masks are bool, true = may attend.
 */
import { type GPTConfig, gpt2ParamShapes } from './config.js';
import { type Dim, Graph, GraphBuildError, ops, type Tensor } from './graph/index.js';

const { add, mul, matmul, reshape, transpose, softmax, where } = ops;

export type FloatDType = 'float32' | 'float64';
export type ParamTensors = Map<string, Tensor>;

/** Score of a masked key: exp() underflows to exactly 0, and a fully masked row stays finite. */
const MASKED_SCORE = -1e9;

/** Declares every parameter as a graph input, in the contract order and names. */
export function declareParams(g: Graph, cfg: GPTConfig, dtype: FloatDType = 'float32'): ParamTensors {
  return new Map(gpt2ParamShapes(cfg).map(({ name, shape }) => [name, g.input(name, dtype, shape)]));
}

function param(p: ParamTensors, name: string): Tensor {
  const t = p.get(name);
  if (!t) throw new GraphBuildError('model', `missing parameter '${name}'`);
  return t;
}

// ---- LayerNorm ----

function layerNorm(x: Tensor, p: ParamTensors, prefix: string, cfg: GPTConfig): Tensor {
  return ops.layerNorm(x, param(p, `${prefix}.weight`), param(p, `${prefix}.bias`), cfg.layer_norm_epsilon);
}

// ---- Linear (HF Conv1D: weight [in, out], so y = x @ W + b) ----

function linear(x: Tensor, p: ParamTensors, prefix: string): Tensor {
  return add(matmul(x, param(p, `${prefix}.weight`)), param(p, `${prefix}.bias`));
}

// ---- causal self-attention ----

export interface KV {
  key: Tensor; // [B, H, P, hd]
  value: Tensor; // [B, H, P, hd]
}

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

export interface GPTInputs {
  /** int64 [B, S] */
  inputIds: Tensor;
  /** int64 [B, S]; default 0..S-1 (then S must be static or is read from the ids' shape). */
  positionIds?: Tensor;
  /** bool [B, T]: false hides padding keys (left padding in batched decoding). */
  attentionMask?: Tensor;
  /** Per layer, the cached keys/values [B, H, P, hd]. */
  past?: KV[];
}

/** Final hidden states [B, S, D] (after ln_f) and each layer's grown cache [B, H, T, hd]. */
export function gptHidden(
  cfg: GPTConfig,
  p: ParamTensors,
  inp: GPTInputs,
): { hidden: Tensor; presents: KV[] } {
  const ids = inp.inputIds;
  const S = ids.shape[1];
  const tok = ops.gather(param(p, 'wte.weight'), ids); // [B, S, D]
  const wpe = param(p, 'wpe.weight');
  const pos = inp.positionIds
    ? ops.gather(wpe, inp.positionIds) // [B, S, D]
    : typeof S === 'number'
      ? ops.slice(wpe, [0], [S], [0]) // [S, D]
      : ops.gather(wpe, ops.range(ids.graph.scalar(0, 'int64'), ops.dimOf(ids, 1))); // [S, D]
  let x = add(tok, pos); // [B, S, D]
  const mask = attentionMask(ids, inp.attentionMask, inp.past?.[0]?.key);
  const presents: KV[] = [];
  for (let i = 0; i < cfg.n_layer; i++) {
    const b = block(x, p, i, cfg, mask, inp.past?.[i]);
    x = b.x;
    presents.push(b.present);
  }
  return { hidden: layerNorm(x, p, 'ln_f', cfg), presents };
}

/**
 * Causal mask [S, T] (query s sits at absolute index P + s and sees keys 0..P+s), combined with
 * the padding mask into [B, 1, S, T]. Static and without a cache it is a constant.
 */
function attentionMask(ids: Tensor, padding: Tensor | undefined, pastKey: Tensor | undefined): Tensor {
  const g = ids.graph;
  const S = ids.shape[1];
  let causal: Tensor;
  if (!pastKey && typeof S === 'number') {
    const tri = Array.from({ length: S * S }, (_, k) => (k % S <= Math.floor(k / S) ? 1 : 0));
    causal = g.constant(tri, 'bool', [S, S]); // [S, S]
  } else {
    const zero = g.scalar(0, 'int64');
    const P = pastKey ? ops.dimOf(pastKey, 2) : zero;
    const T = ops.add(P, ops.dimOf(ids, 1));
    const keyIdx = ops.unsqueeze(ops.range(zero, T), [0]); // [1, T]
    const queryIdx = ops.unsqueeze(ops.range(P, T), [1]); // [S, 1]
    causal = ops.lessOrEqual(keyIdx, queryIdx); // [S, T]
  }
  if (!padding) return causal;
  return ops.and(causal, ops.unsqueeze(padding, [1, 2])); // [B, 1, S, T]
}

/** Tied LM head: logits = h @ wte^T, [B, S, V]. */
export function lmHead(h: Tensor, p: ParamTensors): Tensor {
  return matmul(h, transpose(param(p, 'wte.weight'), [1, 0]));
}

/**
 * Next-token log-probabilities of a batch of sequences: for t = 1..T-1, log p(x_t | x_<t).
 * The last position's logits predict nothing inside the sequence, so the head skips it.
 */
export function nextTokenLogprobs(cfg: GPTConfig, p: ParamTensors, inp: GPTInputs) {
  const ids = inp.inputIds;
  const { hidden } = gptHidden(cfg, p, inp); // [B, T, D]
  const logits = lmHead(ops.slice(hidden, [0], [-1], [1]), p); // [B, T-1, V]
  const logp = ops.logSoftmax(logits, -1); // [B, T-1, V]
  const targets = ops.unsqueeze(ops.slice(ids, [1], [Number.MAX_SAFE_INTEGER], [1]), [2]); // [B, T-1, 1]
  const tokenLogp = ops.squeeze(ops.gatherElements(logp, targets, 2), [2]); // [B, T-1]
  return { hidden, logits, logp, tokenLogp };
}

// ---- graphs ----

export interface ForwardGraphOptions {
  /** Static or symbolic batch size (default symbolic 'batch'). */
  batch?: Dim;
  /** Static or symbolic sequence length (default symbolic 'seq'). */
  seq?: Dim;
  dtype?: FloatDType;
  /** Also output `logits` [B, T, V] for every position (default false). */
  logits?: boolean;
  /** Add `attention_mask` bool [B, T] and `position_ids` int64 [B, T] inputs (left padding). */
  padding?: boolean;
}

/**
 * Forward graph for `akbe policy logprobs` and tests. Inputs: parameters, `input_ids` int64
 * [B, T] (+ `attention_mask`, `position_ids` with `padding`). Outputs: `logprobs` [B, T-1] and,
 * with `logits`, `logits` [B, T, V].
 */
export function buildForwardGraph(cfg: GPTConfig, opts: ForwardGraphOptions = {}): Graph {
  const g = new Graph({ name: 'gpt2_forward' });
  const dtype = opts.dtype ?? 'float32';
  const p = declareParams(g, cfg, dtype);
  const B = opts.batch ?? 'batch';
  const T = opts.seq ?? 'seq';
  const inp: GPTInputs = { inputIds: g.input('input_ids', 'int64', [B, T]) };
  if (opts.padding) {
    inp.attentionMask = g.input('attention_mask', 'bool', [B, T]);
    inp.positionIds = g.input('position_ids', 'int64', [B, T]);
  }
  if (opts.logits) {
    const { hidden } = gptHidden(cfg, p, inp);
    const logits = lmHead(hidden, p); // [B, T, V]
    const logp = ops.logSoftmax(ops.slice(logits, [0], [-1], [1]), -1); // [B, T-1, V]
    const targets = ops.unsqueeze(ops.slice(inp.inputIds, [1], [Number.MAX_SAFE_INTEGER], [1]), [2]);
    g.output(ops.squeeze(ops.gatherElements(logp, targets, 2), [2]), 'logprobs');
    g.output(logits, 'logits');
  } else {
    g.output(nextTokenLogprobs(cfg, p, inp).tokenLogp, 'logprobs');
  }
  return g;
}

/**
 * KV-cache decode graph; prefill is the same graph with an empty cache (P = 0) and S = prompt
 * length. Inputs: parameters, `input_ids` int64 [B, S], `position_ids` int64 [B, S],
 * `attention_mask` bool [B, P + S], `past_key_i` / `past_value_i` [B, H, P, hd] for each layer
 * i. Outputs: `logits` [B, V] of each row's LAST new position, `present_key_i` /
 * `present_value_i` [B, H, P + S, hd].
 */
export function buildDecodeGraph(cfg: GPTConfig, opts: { dtype?: FloatDType } = {}): Graph {
  const g = new Graph({ name: 'gpt2_decode' });
  const dtype = opts.dtype ?? 'float32';
  const p = declareParams(g, cfg, dtype);
  const hd = cfg.n_embd / cfg.n_head;
  const past: KV[] = [];
  for (let i = 0; i < cfg.n_layer; i++) {
    past.push({
      key: g.input(`past_key_${i}`, dtype, ['batch', cfg.n_head, 'past', hd]),
      value: g.input(`past_value_${i}`, dtype, ['batch', cfg.n_head, 'past', hd]),
    });
  }
  const inp: GPTInputs = {
    inputIds: g.input('input_ids', 'int64', ['batch', 'new']),
    positionIds: g.input('position_ids', 'int64', ['batch', 'new']),
    attentionMask: g.input('attention_mask', 'bool', ['batch', 'total']),
    past,
  };
  const { hidden, presents } = gptHidden(cfg, p, inp); // [B, S, D]
  const last = ops.squeeze(ops.slice(hidden, [-1], [Number.MAX_SAFE_INTEGER], [1]), [1]); // [B, D]
  g.output(ops.gemm(last, param(p, 'wte.weight'), null, { transB: true }), 'logits'); // [B, V]
  presents.forEach((kv, i) => {
    g.output(kv.key, `present_key_${i}`);
    g.output(kv.value, `present_value_${i}`);
  });
  return g;
}
