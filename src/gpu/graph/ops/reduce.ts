/**
 * Reductions: ReduceSum, ReduceMean, ReduceMax (axes as an int64 input, opset >= 18). The
 * broadcasting helpers every gradient rule leans on, `sumTo` and `expandTo`, live in
 * broadcast.ts (re-exported here, as `ops.sumTo` / `ops.expandTo`).
 */
import { registerGradRules } from '../autodiff.js';
import { type GraphNode, normAxis, type Tensor } from '../graph.js';
import { expandTo, reduceNode, reshape, sumTo } from './broadcast.js';
import { equal, mul, where } from './elementwise.js';

/** Sum over `axes` (all axes when omitted). */
export const reduceSum = (x: Tensor, axes?: number[], keepdims = false) =>
  reduceNode('ReduceSum', x, axes, keepdims);
export const reduceMean = (x: Tensor, axes?: number[], keepdims = false) =>
  reduceNode('ReduceMean', x, axes, keepdims);
export const reduceMax = (x: Tensor, axes?: number[], keepdims = false) =>
  reduceNode('ReduceMax', x, axes, keepdims);

export { expandTo, sumTo };

function axesOf(node: GraphNode): number[] {
  const x = node.inputs[0]!;
  const axesT = node.inputs[1];
  if (!axesT) return x.shape.map((_, i) => i);
  return x.graph.constantValues(axesT).map((a) => normAxis('Reduce', a, x.rank));
}

/** Re-inserts reduced axes (as size 1) so a reduced tensor broadcasts against the input. */
function unreduce(t: Tensor, node: GraphNode): Tensor {
  if (node.attrs.keepdims.v === 1) return t;
  const axes = new Set(axesOf(node));
  return reshape(
    t,
    node.inputs[0]!.shape.map((d, i) => (axes.has(i) ? 1 : d)),
  );
}

registerGradRules({
  ReduceSum: ([g], node) => [expandTo(unreduce(g!, node), node.inputs[0]!.shape), null],
  ReduceMean: ([g], node) => {
    const x = node.inputs[0]!;
    const n = axesOf(node).reduce((k, a) => k * (x.shape[a] as number), 1);
    return [expandTo(mul(unreduce(g!, node), 1 / n), x.shape), null];
  },
  // The gradient goes to every position equal to the max (ties: measure zero for real inputs).
  ReduceMax: ([g], node) => {
    const hit = equal(node.inputs[0]!, unreduce(node.outputs[0], node));
    return [where(hit, unreduce(g!, node), 0), null];
  },
});
