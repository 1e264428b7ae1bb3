/**
 * ONNX graph builder with static shape tracking and reverse-mode autodiff: the public surface.
 *
 * ```ts
 * import { Graph, gradients, ops } from './graph/index.js';
 * const g = new Graph();                                   // opset 20 by default
 * const x = g.input('x', 'float32', [4, 8]);                // dtype + shape (string = symbolic dim)
 * const w = g.input('w', 'float32', [8, 3]);
 * const y = ops.softmax(ops.add(ops.matmul(x, w), 1));     // shapes tracked: y.shape = [4, 3]
 * const loss = ops.reduceSum(ops.mul(y, y));               // rank-0 scalar
 * const [dw] = gradients(loss, [w]);                        // backward nodes appended to g
 * g.output(loss, 'loss'); g.output(dw, 'grad_w');
 * const bytes = g.serialize();                              // ModelProto: InferenceSession.create(bytes)
 * ```
 *
 * - `Graph`: `input(name, dtype, shape)`, `constant(values, dtype, shape?)`, `scalar(v, dtype)`,
 *   `ints(values)` (int64 1-D), `output(t, name?)`, `serialize(): Uint8Array` (dead nodes pruned).
 * - `Tensor`: `{ name, dtype, shape, rank, size, graph }`; dtypes float32 | float64 | int64 |
 *   int32 | bool. Binary ops accept a number on either side (a scalar of the other's dtype).
 * - `ops.*`: one helper per ONNX op, grouped by family in `./ops/*.ts`, each file holding its
 *   forward helpers and the gradient rules of those ops (house rule 8). Composites (gelu) have
 *   no rule of their own.
 * - `gradients(loss, wrt, seed?)`: d loss / d wrt as tensors of the same graph. A node on the
 *   path without a rule throws `MissingGradientError` naming the op.
 * - Opset 20 (IR 9): LayerNormalization-17 and Gelu-20 (approximate='tanh') are standard ops, no
 *   com.microsoft domain needed. ORT 1.30's CPU provider has float32 kernels for both but no
 *   float64 ones, so in float64 graphs `Graph.composite` records ONE tape node (whose rule is
 *   the one checked) and serialises it as primitives. Erf has no float64 kernel at all, so the
 *   erf form of GELU is checked in float32; float64 checks use gelu(x, 'tanh').
 * - Low level: `graph.addNode(opType, inputs, attrs, outs)` with `A.i/f/ints/floats/s` attribute
 *   constructors, for ops without a helper (such a node has no gradient rule).
 */
import * as elementwise from './ops/elementwise.js';
import * as gather from './ops/gather.js';
import * as matmul from './ops/matmul.js';
import * as nn from './ops/nn.js';
import * as reduce from './ops/reduce.js';
import * as shape from './ops/shape.js';

export { type GradRule, gradients, hasGradRule, MissingGradientError } from './autodiff.js';
export {
  A,
  type Dim,
  type DType,
  Graph,
  GraphBuildError,
  type GraphNode,
  type Shape,
  Tensor,
} from './graph.js';

export const ops = { ...elementwise, ...gather, ...matmul, ...nn, ...reduce, ...shape };
