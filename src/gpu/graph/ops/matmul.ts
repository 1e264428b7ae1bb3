/**
 * Matrix products: MatMul (numpy batched, rank >= 2) and Gemm (rank 2, fused transposes,
 * alpha/beta and a broadcast bias). Weight gradients of a batched activation times a 2-D weight
 * are taken as one Gemm over the flattened batch ([N, in]^T @ [N, out]) rather than a batched
 * product followed by a reduction: one large matrix product is what the CPU does fastest.
 */
import { registerGradRules } from '../autodiff.js';
import { A, broadcastShapes, GraphBuildError, type Tensor } from '../graph.js';
import { sumTo } from './broadcast.js';
import { mul } from './elementwise.js';
import { reshape, transpose } from './shape.js';

/** a @ b with numpy batching: [..., M, K] @ [..., K, N] -> [..., M, N]. */
export function matmul(a: Tensor, b: Tensor): Tensor {
  if (a.rank < 2 || b.rank < 2) throw new GraphBuildError('MatMul', `rank < 2 not supported: ${a}, ${b}`);
  const [m, k1] = a.shape.slice(-2);
  const [k2, n] = b.shape.slice(-2);
  if (k1 !== k2 && typeof k1 === 'number' && typeof k2 === 'number') {
    throw new GraphBuildError('MatMul', `inner dims differ: ${a} @ ${b}`);
  }
  const batch = broadcastShapes('MatMul', a.shape.slice(0, -2), b.shape.slice(0, -2));
  return a.graph.addNode('MatMul', [a, b], {}, [{ dtype: a.dtype, shape: [...batch, m, n] }])[0];
}

export interface GemmOptions {
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  beta?: number;
}

/** alpha * op(a) @ op(b) + beta * c, with a and b rank 2 and c broadcast to [M, N]. */
export function gemm(a: Tensor, b: Tensor, c: Tensor | null = null, opts: GemmOptions = {}): Tensor {
  if (a.rank !== 2 || b.rank !== 2) throw new GraphBuildError('Gemm', `operands must be rank 2: ${a}, ${b}`);
  const [m, ka] = opts.transA ? [a.shape[1], a.shape[0]] : a.shape;
  const [kb, n] = opts.transB ? [b.shape[1], b.shape[0]] : b.shape;
  if (ka !== kb && typeof ka === 'number' && typeof kb === 'number') {
    throw new GraphBuildError(
      'Gemm',
      `inner dims differ: ${a} ${b} (transA=${!!opts.transA}, transB=${!!opts.transB})`,
    );
  }
  const attrs = {
    transA: A.i(opts.transA ? 1 : 0),
    transB: A.i(opts.transB ? 1 : 0),
    alpha: A.f(opts.alpha ?? 1),
    beta: A.f(opts.beta ?? 1),
  };
  const inputs = c ? [a, b, c] : [a, b];
  return a.graph.addNode('Gemm', inputs, attrs, [{ dtype: a.dtype, shape: [m, n] }])[0];
}

/** Swaps the last two axes. */
export function transposeLast2(x: Tensor): Tensor {
  const perm = x.shape.map((_, i) => i);
  [perm[x.rank - 2], perm[x.rank - 1]] = [perm[x.rank - 1], perm[x.rank - 2]];
  return transpose(x, perm);
}

/** [..., K] -> [N, K] (N = product of the leading dims). */
const flatten2 = (x: Tensor) => reshape(x, [-1, x.shape[x.rank - 1]]);

registerGradRules({
  MatMul: ([g], { inputs: [a, b] }, needs) => {
    // Activation [..., M, K] times a 2-D weight [K, N]: weight gradient is one Gemm over all rows.
    if (b!.rank === 2 && a!.rank > 2) {
      return [
        needs[0] ? matmul(g!, transposeLast2(b!)) : null,
        needs[1] ? gemm(flatten2(a!), flatten2(g!), null, { transA: true }) : null,
      ];
    }
    return [
      needs[0] ? sumTo(matmul(g!, transposeLast2(b!)), a!.shape) : null,
      needs[1] ? sumTo(matmul(transposeLast2(a!), g!), b!.shape) : null,
    ];
  },
  Gemm: ([g], { inputs: [a, b, c], attrs }, needs) => {
    const tA = attrs.transA.v === 1;
    const tB = attrs.transB.v === 1;
    const alpha = attrs.alpha.v as number;
    const beta = attrs.beta.v as number;
    // Y = op(A) op(B): dA = g op(B)^T (transposed back if A was), dB = op(A)^T g (likewise).
    const ga = !needs[0]
      ? null
      : tA
        ? gemm(b!, g!, null, { transA: tB, transB: true, alpha })
        : gemm(g!, b!, null, { transB: !tB, alpha });
    const gb = !needs[1]
      ? null
      : tB
        ? gemm(g!, a!, null, { transA: true, transB: tA, alpha })
        : gemm(a!, g!, null, { transA: !tA, alpha });
    const gc = c && needs[2] ? sumTo(beta === 1 ? g! : mul(g!, beta), c.shape) : null;
    return c ? [ga, gb, gc] : [ga, gb];
  },
});
