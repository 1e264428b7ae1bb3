/**
 * Reductions: ReduceSum, ReduceMean, ReduceMax (axes as an int64 input, opset >= 18), and the
 * two broadcasting helpers every gradient rule leans on: `sumTo` (reduce a broadcast gradient
 * back to an input's shape) and `expandTo` (broadcast a reduced gradient back out).
 */
import { registerGradRules } from '../autodiff.js';
import { GraphBuildError, type GraphNode, normAxis, type Shape, shapeEquals, type Tensor } from '../graph.js';
import { equal, mul, where } from './elementwise.js';
import { reshape } from './shape.js';

function reduce(op: string, x: Tensor, axes: number[] | undefined, keepdims: boolean): Tensor {
  const ax = (axes ?? x.shape.map((_, i) => i)).map((a) => normAxis(op, a, x.rank)).sort((a, b) => a - b);
  const shape: Shape = [];
  x.shape.forEach((d, i) => {
    if (!ax.includes(i)) shape.push(d);
    else if (keepdims) shape.push(1);
  });
  const g = x.graph;
  return g.addNode(op, [x, g.ints(ax)], { keepdims: { kind: 'int', v: keepdims ? 1 : 0 } }, [
    { dtype: x.dtype, shape },
  ])[0];
}

/** Sum over `axes` (all axes when omitted). */
export const reduceSum = (x: Tensor, axes?: number[], keepdims = false) =>
  reduce('ReduceSum', x, axes, keepdims);
export const reduceMean = (x: Tensor, axes?: number[], keepdims = false) =>
  reduce('ReduceMean', x, axes, keepdims);
export const reduceMax = (x: Tensor, axes?: number[], keepdims = false) =>
  reduce('ReduceMax', x, axes, keepdims);

/** Broadcasts x to `shape` (ONNX Expand; static dims only). */
export function expandTo(x: Tensor, shape: Shape): Tensor {
  if (shapeEquals(x.shape, shape)) return x;
  const g = x.graph;
  const dims = shape.map((d) => {
    if (typeof d !== 'number') throw new GraphBuildError('Expand', `symbolic dim '${d}' not supported`);
    return d;
  });
  return g.addNode('Expand', [x, g.ints(dims)], {}, [{ dtype: x.dtype, shape }])[0];
}

/** Sums a gradient of broadcast shape `g.shape` back to `shape` (the inverse of broadcasting). */
export function sumTo(g: Tensor, shape: Shape): Tensor {
  if (shapeEquals(g.shape, shape)) return g;
  const lead = g.rank - shape.length;
  if (lead < 0) throw new GraphBuildError('sumTo', `cannot sum ${g} to [${shape}]`);
  const axes: number[] = [];
  for (let i = 0; i < g.rank; i++) if (i < lead || (shape[i - lead] === 1 && g.shape[i] !== 1)) axes.push(i);
  const summed = axes.length ? reduceSum(g, axes, true) : g;
  return shapeEquals(summed.shape, shape) ? summed : reshape(summed, shape);
}

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
