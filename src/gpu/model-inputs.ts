/**
 * What every architecture's graph shares: parameters as named graph inputs, the token inputs of
 * a forward pass, the per-layer KV cache, and the causal + padding attention mask.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S. Masks are bool, true = may attend.
 */
import type { ParamShape } from './config.js';
import { type Graph, GraphBuildError, ops, type Tensor } from './graph/index.js';
import { bf16ToFloat32 } from './safetensors.js';

export type FloatDType = 'float32' | 'float64';
export type ParamTensors = Map<string, Tensor>;

/**
 * How an inference graph takes its weights: float32 inputs, or 16-bit inputs (half the bytes fed
 * and held by the session) widened to float32 inside the graph where each is used, so compute
 * stays float32. float16 inputs are widened by Cast; bfloat16 travels as its uint16 bit patterns
 * (onnxruntime's JavaScript API has no bfloat16 tensors, and ONNX no bit reinterpretation before
 * BitCast, which onnxruntime 1.30 lacks) and is widened exactly by a 65,536-entry float32 table.
 */
export const WEIGHTS_DTYPES = ['float32', 'float16', 'bfloat16'] as const;
export type WeightsDtype = (typeof WEIGHTS_DTYPES)[number];

/** The graph input dtype that carries weights of each kind. */
export const WEIGHT_INPUT_DTYPE = { float32: 'float32', float16: 'float16', bfloat16: 'uint16' } as const;

/** bfloat16 bits -> float32, every pattern: one table per graph (256 KiB). */
const BF16_TABLES = new WeakMap<Graph, Tensor>();
function bf16Table(g: Graph): Tensor {
  let t = BF16_TABLES.get(g);
  if (!t) {
    const words = Uint16Array.from({ length: 65536 }, (_, i) => i);
    t = g.constant(bf16ToFloat32(words), 'float32', [65536], 'bf16_to_float32');
    BF16_TABLES.set(g, t);
  }
  return t;
}

/** A weight input widened to float32 (a no-op for float32 inputs). */
function widen(t: Tensor): Tensor {
  if (t.dtype === 'float16') return ops.cast(t, 'float32');
  if (t.dtype === 'uint16') return ops.gather(bf16Table(t.graph), ops.cast(t, 'int32'));
  return t;
}

/** Score of a masked key: exp() underflows to exactly 0, and a fully masked row stays finite. */
export const MASKED_SCORE = -1e9;

/**
 * Declares every parameter as a graph input, in the contract order and names; with 16-bit
 * `weights` (inference graphs only: gradients need float32 inputs) they are widened where used.
 */
export function declareParamInputs(
  g: Graph,
  shapes: ParamShape[],
  dtype: FloatDType,
  weights: WeightsDtype = 'float32',
): ParamTensors {
  if (weights !== 'float32' && dtype !== 'float32')
    throw new GraphBuildError('model', `${weights} weights widen to float32, not ${dtype}`);
  const inputDtype = WEIGHT_INPUT_DTYPE[weights] === 'float32' ? dtype : WEIGHT_INPUT_DTYPE[weights];
  return new Map(shapes.map(({ name, shape }) => [name, g.input(name, inputDtype, shape)]));
}

function rawParam(p: ParamTensors, name: string): Tensor {
  const t = p.get(name);
  if (!t) throw new GraphBuildError('model', `missing parameter '${name}'`);
  return t;
}

/**
 * A parameter in the compute dtype. A 16-bit weight is widened at each use, so its float32 copy
 * lives only until that use's consumer ran (not for the whole run, as one shared cast would).
 */
export function param(p: ParamTensors, name: string): Tensor {
  return widen(rawParam(p, name));
}

/** Rows `ids` of an embedding parameter: gathered in its stored dtype, then widened (rows only). */
export function embed(p: ParamTensors, name: string, ids: Tensor): Tensor {
  return widen(ops.gather(rawParam(p, name), ids));
}

export interface KV {
  key: Tensor; // [B, K, P, hd] (K = cached heads: all heads for GPT-2, the KV heads with GQA)
  value: Tensor; // [B, K, P, hd]
}

/** What `Architecture.hidden` returns: the final hidden states [B, S, D] and each layer's grown cache. */
export interface HiddenStates {
  hidden: Tensor;
  presents: KV[];
}

/** The residual stream x [B, S, D] through `n` layers in order, collecting each layer's grown cache. */
export function throughLayers(
  x: Tensor,
  n: number,
  layer: (x: Tensor, i: number) => { x: Tensor; present: KV },
): { x: Tensor; presents: KV[] } {
  const presents: KV[] = [];
  for (let i = 0; i < n; i++) {
    const b = layer(x, i);
    x = b.x;
    presents.push(b.present);
  }
  return { x, presents };
}

export interface ModelInputs {
  /** int64 [B, S] */
  inputIds: Tensor;
  /** int64 [B, S]; default 0..S-1 (then S must be static or is read from the ids' shape). */
  positionIds?: Tensor;
  /** bool [B, T]: false hides padding keys (left padding in batched decoding). */
  attentionMask?: Tensor;
  /** Per layer, the cached keys/values [B, K, P, hd]. */
  past?: KV[];
}

/** Positions 0..S-1 as int64 [S], for inputs without explicit position ids. */
export function defaultPositions(ids: Tensor): Tensor {
  const g = ids.graph;
  const S = ids.shape[1];
  return typeof S === 'number'
    ? g.constant(
        Array.from({ length: S }, (_, i) => i),
        'int64',
        [S],
      )
    : ops.range(g.scalar(0, 'int64'), ops.dimOf(ids, 1));
}

/**
 * Causal mask [S, T] (query s sits at absolute index P + s and sees keys 0..P+s), combined with
 * the padding mask into [B, 1, S, T]. Static and without a cache it is a constant.
 */
export function attentionMask(ids: Tensor, padding: Tensor | undefined, pastKey: Tensor | undefined): Tensor {
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
