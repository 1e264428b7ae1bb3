/**
 * The graphs ORT runs for a policy of any architecture (architecture.ts): forward logprobs, the
 * KV-cache decode graph (prefill and the concatenating cross-check), and the next-token logprobs
 * the training step differentiates. Parameters are graph INPUTS in the architecture's contract
 * names, so one ONNX model serves every policy version.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S (or the full sequence), K cached
 * heads, hd head dim, D width, V vocab_size.
 */
import { architecture, type PolicyConfig } from './architecture.js';
import { type Dim, Graph, ops, type Tensor } from './graph/index.js';
import {
  declareParamInputs,
  type FloatDType,
  type KV,
  type ModelInputs,
  type ParamTensors,
  type WeightsDtype,
} from './model-inputs.js';

export type { FloatDType, ParamTensors } from './model-inputs.js';

/** Declares every parameter as a graph input, in the contract order and names. */
export function declareParams(
  g: Graph,
  cfg: PolicyConfig,
  dtype: FloatDType = 'float32',
  weights: WeightsDtype = 'float32',
): ParamTensors {
  return declareParamInputs(g, architecture(cfg).paramShapes(), dtype, weights);
}

/** Logits [B, S, V] = h @ W_head^T. */
function lmHead(cfg: PolicyConfig, h: Tensor, p: ParamTensors): Tensor {
  return ops.matmul(h, ops.transpose(architecture(cfg).headWeight(p), [1, 0]));
}

/** log p(ids[:, t+1] | ids[:, <=t]) from log-probabilities logp [B, T-1, V]: [B, T-1]. */
function pickTargets(logp: Tensor, ids: Tensor): Tensor {
  const targets = ops.unsqueeze(ops.slice(ids, [1], [Number.MAX_SAFE_INTEGER], [1]), [2]); // [B, T-1, 1]
  return ops.squeeze(ops.gatherElements(logp, targets, 2), [2]); // [B, T-1]
}

/**
 * Next-token log-probabilities of a batch of sequences: for t = 1..T-1, log p(x_t | x_<t).
 * The last position's logits predict nothing inside the sequence, so the head skips it.
 */
export function nextTokenLogprobs(cfg: PolicyConfig, p: ParamTensors, inp: ModelInputs) {
  const { hidden } = architecture(cfg).hidden(p, inp); // [B, T, D]
  const logits = lmHead(cfg, ops.slice(hidden, [0], [-1], [1]), p); // [B, T-1, V]
  const logp = ops.logSoftmax(logits, -1); // [B, T-1, V]
  return { hidden, logits, logp, tokenLogp: pickTargets(logp, inp.inputIds) };
}

export interface ForwardGraphOptions {
  /** Static or symbolic batch size (default symbolic 'batch'). */
  batch?: Dim;
  /** Static or symbolic sequence length (default symbolic 'seq'). */
  seq?: Dim;
  dtype?: FloatDType;
  /** How the weights come in (model-inputs.ts; default float32). */
  weights?: WeightsDtype;
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
export function buildForwardGraph(cfg: PolicyConfig, opts: ForwardGraphOptions = {}): Graph {
  const arch = architecture(cfg);
  const g = new Graph({ name: `${arch.name}_forward` });
  const p = declareParams(g, cfg, opts.dtype ?? 'float32', opts.weights);
  const B = opts.batch ?? 'batch';
  const T = opts.seq ?? 'seq';
  const inp: ModelInputs = { inputIds: g.input('input_ids', 'int64', [B, T]) };
  if (opts.padding) {
    inp.attentionMask = g.input('attention_mask', 'bool', [B, T]);
    inp.positionIds = g.input('position_ids', 'int64', [B, T]);
  }
  if (opts.logits) {
    const logits = lmHead(cfg, arch.hidden(p, inp).hidden, p); // [B, T, V]
    const logp = ops.logSoftmax(ops.slice(logits, [0], [-1], [1]), -1); // [B, T-1, V]
    g.output(pickTargets(logp, inp.inputIds), 'logprobs');
    g.output(logits, 'logits');
  } else {
    g.output(nextTokenLogprobs(cfg, p, inp).tokenLogp, 'logprobs');
  }
  return g;
}

/**
 * KV-cache decode graph; prefill is the same graph with an empty cache (P = 0) and S = prompt
 * length. Inputs: parameters, `input_ids` int64 [B, S], `position_ids` int64 [B, S],
 * `attention_mask` bool [B, P + S], `past_key_i` / `past_value_i` [B, K, P, hd] for each layer
 * i. Outputs: `logits` [B, V] of each row's LAST new position, `present_key_i` /
 * `present_value_i` [B, K, P + S, hd].
 */
export function buildDecodeGraph(
  cfg: PolicyConfig,
  opts: { dtype?: FloatDType; weights?: WeightsDtype } = {},
): Graph {
  const arch = architecture(cfg);
  const g = new Graph({ name: `${arch.name}_decode` });
  const dtype = opts.dtype ?? 'float32';
  const p = declareParams(g, cfg, dtype, opts.weights);
  const past: KV[] = [];
  for (let i = 0; i < arch.nLayer; i++) {
    past.push({
      key: g.input(`past_key_${i}`, dtype, ['batch', arch.kvHeads, 'past', arch.headDim]),
      value: g.input(`past_value_${i}`, dtype, ['batch', arch.kvHeads, 'past', arch.headDim]),
    });
  }
  const inp: ModelInputs = {
    inputIds: g.input('input_ids', 'int64', ['batch', 'new']),
    positionIds: g.input('position_ids', 'int64', ['batch', 'new']),
    attentionMask: g.input('attention_mask', 'bool', ['batch', 'total']),
    past,
  };
  const { hidden, presents } = arch.hidden(p, inp); // [B, S, D]
  const last = ops.squeeze(ops.slice(hidden, [-1], [Number.MAX_SAFE_INTEGER], [1]), [1]); // [B, D]
  g.output(ops.gemm(last, arch.headWeight(p), null, { transB: true }), 'logits'); // [B, V]
  presents.forEach((kv, i) => {
    g.output(kv.key, `present_key_${i}`);
    g.output(kv.value, `present_value_${i}`);
  });
  return g;
}
