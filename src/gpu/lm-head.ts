/**
 * The training graph's lm head in chunks of positions (issue 25 item 1): the per-token logprob of
 * the chosen token and the per-token entropy, computed so that the vocabulary-sized logits,
 * log-softmax and their gradient exist for one chunk of rows at a time, never for all B (T-1)
 * positions at once. On the Qwen3 shapes (V = 151,936) one [N, V] float32 block is 146 MiB at
 * 4 x 64 and 591 MiB at 4 x 256, and the unchunked step keeps several of them alive.
 *
 * One tape node (`ChunkedTokenLogprobs`, Graph.composite) with its own gradient rule:
 *   forward   for each chunk c of rows:  logp_c = logSoftmax(h_c W^T)              [C, V]
 *             tok_c = logp_c[t_c],  ent_c = -sum_v exp(logp_c) logp_c               [C]
 *             (logp_c dies with its chunk: the backward does not read it)
 *   backward  for each chunk, with g_c = d loss / d tok_c:   (activation recomputation)
 *             p_c = softmax(h_c W^T);  dl_c = g_c (onehot(t_c) - p_c)               [C, V]
 *             dh_c = dl_c W;  dW += dl_c^T h_c  (one Gemm with C = the running sum, which ORT
 *             may compute in place)
 * The entropy is a metric: no gradient flows into it (a loss that used it would throw here).
 *
 * Ordering: ORT's default execution order is a depth-first walk back from the outputs, so two
 * chunks with no data dependency could be computed side by side and both held. Each chunk's
 * forward ends in one [C, 2] tensor (both of logp_c's readers inside its subtree), and each
 * backward chunk's recomputation reads h_c concatenated with an EMPTY slice of the previous
 * chunk's dh and running dW (of the upstream gradient for the first chunk): a data dependency
 * that copies no value, so chunk c + 1 starts after chunk c's [C, V] blocks are dead, and ORT's
 * common-subexpression elimination cannot merge the recomputed logits with the forward's.
 */
import { architecture, type PolicyConfig } from './architecture.js';
import { registerGradRules } from './graph/autodiff.js';
import { A, GraphBuildError, type Tensor } from './graph/graph.js';
import { ops } from './graph/index.js';
import { nextTokenLogprobs, type ParamTensors } from './policy-graphs.js';

const { concat, exp, gatherElements, gemm, logSoftmax, mul, neg, reduceSum, scatterElementsAdd, slice } = ops;

const OP = 'ChunkedTokenLogprobs';

/** Bytes one chunk's [C, V] block may take when TrainerOptions.logitsChunk is not given. */
export const DEFAULT_LOGITS_CHUNK_BYTES = 64 * 2 ** 20;

/**
 * Positions per chunk: `requested` when given (>= 1), else as many rows as fit
 * DEFAULT_LOGITS_CHUNK_BYTES of [rows, V] values (at least 1). A result >= rows means one chunk,
 * which train-step.ts builds as the plain unchunked head (today's graph, to the byte).
 */
export function logitsChunkRows(vocab: number, bytesPerValue: number, requested?: number): number {
  if (requested !== undefined) {
    if (!Number.isInteger(requested) || requested < 1)
      throw new GraphBuildError(OP, `logitsChunk must be a positive integer, got ${requested}`);
    return requested;
  }
  return Math.max(1, Math.floor(DEFAULT_LOGITS_CHUNK_BYTES / (vocab * bytesPerValue)));
}

/** [lo, hi) row ranges of `n` rows in chunks of `chunk` (the last one may be shorter). */
export function chunkRanges(n: number, chunk: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let lo = 0; lo < n; lo += chunk) out.push([lo, Math.min(n, lo + chunk)]);
  return out;
}

const rowsOf = (x: Tensor, lo: number, hi: number) => slice(x, [lo], [hi], [0]);

/**
 * log p(t_n | h_n) and the entropy of p(. | h_n) for rows h [N, D] against the head W [V, D] and
 * targets [N, 1] int64, `chunk` rows at a time. Returns both as [N].
 */
export function chunkedTokenLogprobs(
  h: Tensor,
  w: Tensor,
  targets: Tensor,
  chunk: number,
): { tokenLogp: Tensor; entropy: Tensor } {
  const n = h.shape[0];
  if (typeof n !== 'number' || h.rank !== 2 || w.rank !== 2 || targets.rank !== 2)
    throw new GraphBuildError(OP, `needs static h [N, D], w [V, D], targets [N, 1]: ${h}, ${w}, ${targets}`);
  const g = h.graph;
  const [tokenLogp, entropy] = g.composite(OP, [h, w, targets], { chunk: A.i(chunk) }, () => {
    const parts = chunkRanges(n, chunk).map(([lo, hi]) => {
      const logp = logSoftmax(gemm(rowsOf(h, lo, hi), w, null, { transB: true }), 1); // [C, V]
      const tok = gatherElements(logp, rowsOf(targets, lo, hi), 1); // [C, 1]
      const ent = neg(reduceSum(mul(exp(logp), logp), [1], true)); // [C, 1]
      return concat([tok, ent], 1); // [C, 2]: both of logp's readers in one subtree
    });
    const both = parts.length === 1 ? parts[0] : concat(parts, 0); // [N, 2]
    const col = (k: number) => ops.squeeze(slice(both, [k], [k + 1], [1]), [1]); // [N]
    return [col(0), col(1)];
  });
  return { tokenLogp, entropy };
}

/**
 * The train graph's head for input_ids [B, T]: the plain unchunked head (today's graph, to the
 * byte: `logp` [B, T-1, V] for the entropy metric) when one chunk holds all B (T-1) rows, else the
 * chunked one (`tokEntropy` [B, T-1] instead of `logp`). `tokenLogp` is [B, T-1] either way.
 */
export function trainHead(
  cfg: PolicyConfig,
  p: ParamTensors,
  inputIds: Tensor,
  opts: { dtype: 'float32' | 'float64'; logitsChunk?: number },
): { tokenLogp: Tensor; logp?: Tensor; tokEntropy?: Tensor } {
  const arch = architecture(cfg);
  const [B, T] = inputIds.shape as number[];
  const rows = B * (T - 1);
  const chunk = logitsChunkRows(arch.vocabSize, opts.dtype === 'float64' ? 8 : 4, opts.logitsChunk);
  if (chunk >= rows) {
    const fwd = nextTokenLogprobs(cfg, p, { inputIds });
    return { tokenLogp: fwd.tokenLogp, logp: fwd.logp };
  }
  const { hidden } = arch.hidden(p, { inputIds }); // [B, T, D]
  const h = ops.reshape(slice(hidden, [0], [-1], [1]), [rows, hidden.shape[2]]); // [N, D]
  const targets = ops.reshape(slice(inputIds, [1], [Number.MAX_SAFE_INTEGER], [1]), [rows, 1]); // [N, 1]
  const out = chunkedTokenLogprobs(h, arch.headWeight(p), targets, chunk);
  return {
    tokenLogp: ops.reshape(out.tokenLogp, [B, T - 1]),
    tokEntropy: ops.reshape(out.entropy, [B, T - 1]),
  };
}

/** Whether `t` is a float zero tensor Expand(0, dims), as the Gather rule's scatter base. */
function isExpandedZero(t: Tensor | null | undefined): boolean {
  const e = t?.producer;
  if (e?.opType !== 'Expand') return false;
  const base = e.inputs[0]!;
  return t!.graph.isConstant(base) && t!.graph.constantValues(base).every((v) => v === 0);
}

/**
 * A tied head's gradient as autodiff builds it, Sum(head part, ScatterElements(zeros, ids, rows)),
 * rewritten as ScatterElements(head part, ids, rows): the embedding's rows added straight into
 * the chunked head's running sum, without the [V, D] zeros (which ORT's constant folding keeps
 * resident) and the Sum's [V, D] output. Anything else is returned unchanged. The chunked path
 * only: the sum's order (and so its bits) differs from the unchunked graph's.
 */
export function fuseTiedGradient(grad: Tensor): Tensor {
  const sum = grad.producer;
  if (sum?.opType !== 'Sum' || sum.inputs.length !== 2) return grad;
  const k = sum.inputs.findIndex(
    (t) => t?.producer?.opType === 'ScatterElements' && isExpandedZero(t.producer.inputs[0]),
  );
  if (k < 0) return grad;
  const scatter = sum.inputs[k]!.producer!;
  const [, ids, rows] = scatter.inputs;
  return scatterElementsAdd(sum.inputs[1 - k]!, ids!, rows!, scatter.attrs.axis.v as number);
}

/** `x` [C, D] made to depend on `after` without reading a value of it (see the file's head). */
function ordered(x: Tensor, after: Tensor, first: boolean): Tensor {
  const rows = x.shape[0] as number;
  // First chunk: after = the upstream gradient [N, 1], an empty [C, 0] block beside x's columns.
  if (first) return concat([x, slice(after, [0, 0], [rows, 0], [0, 1])], 1);
  // Later chunks: after has x's D columns (dh [C', D], dW [V, D]); an empty [0, D] block below x.
  return concat([x, slice(after, [0], [0], [0])], 0);
}

registerGradRules({
  [OP]: ([gy, gEnt], { inputs: [h, w, targets], attrs }, needs) => {
    // The entropy is a metric; an entropy bonus in the loss would need its term here.
    if (gEnt) throw new GraphBuildError(OP, 'no gradient rule for the entropy output');
    if (!gy) return [null, null, null];
    const chunk = attrs.chunk.v as number;
    const n = h!.shape[0] as number;
    const gTok = ops.unsqueeze(gy, [1]); // [N, 1]
    let acc: Tensor | null = null;
    let prev: Tensor[] = [gTok];
    const dh: Tensor[] = [];
    for (const [lo, hi] of chunkRanges(n, chunk)) {
      const hc = rowsOf(h!, lo, hi);
      const hAfter = prev.reduce((x, p) => ordered(x, p, p === gTok), hc);
      const logits = gemm(hAfter, w!, null, { transB: true }); // [C, V], recomputed
      const gc = rowsOf(gTok, lo, hi); // [C, 1]
      const pNeg = mul(ops.softmax(logits, 1), neg(gc)); // -g p
      const dl = scatterElementsAdd(pNeg, rowsOf(targets!, lo, hi), gc, 1); // g (onehot - p)
      const dhc = gemm(dl, w!); // [C, D]
      acc = gemm(dl, hc, acc, { transA: true }); // [V, D], running sum
      dh.push(dhc);
      prev = [dhc, acc];
    }
    return [needs[0] ? (dh.length === 1 ? dh[0] : concat(dh, 0)) : null, needs[1] ? acc : null, null];
  },
});
