/**
 * The node builders every op family's gradient rules lean on, in a file that imports no other
 * family (so elementwise, reduce and shape import it, and not each other in a circle):
 * Reshape, the Reduce* node, `expandTo` (broadcast a reduced gradient back out) and `sumTo`
 * (reduce a broadcast gradient back to an input's shape).
 */
import { GraphBuildError, normAxis, type Shape, shapeEquals, type Tensor } from '../graph.js';

export const staticDims = (s: Shape) => s.every((d) => typeof d === 'number');
export const prod = (s: Shape) => s.reduce<number>((a, d) => a * (d as number), 1);

/**
 * Reshape with ONNX semantics: 0 copies the input dim at the same index, -1 is inferred. A
 * string in `shape` must be the input's dim at the same index (it is sent as 0).
 */
export function reshape(x: Tensor, shape: Shape): Tensor {
  const g = x.graph;
  if (shapeEquals(x.shape, shape)) return x;
  const spec = shape.map((d, i) => {
    if (typeof d === 'number') return d;
    if (x.shape[i] === d) return 0;
    throw new GraphBuildError('Reshape', `symbolic dim '${d}' at ${i} is not the input's dim (${x})`);
  });
  const out: Shape = shape.map((d, i) => (d === 0 ? x.shape[i] : d));
  const infer = out.indexOf(-1);
  if (infer >= 0) {
    if (!staticDims(x.shape) || !staticDims(out.filter((_, i) => i !== infer))) {
      out[infer] = g.freshName('dim');
    } else {
      const known = prod(out.filter((_, i) => i !== infer));
      if (prod(x.shape) % known !== 0)
        throw new GraphBuildError('Reshape', `cannot reshape ${x} to [${shape}]`);
      out[infer] = prod(x.shape) / known;
    }
  } else if (staticDims(x.shape) && staticDims(out) && prod(x.shape) !== prod(out)) {
    throw new GraphBuildError('Reshape', `cannot reshape ${x} to [${shape}]`);
  }
  return g.addNode('Reshape', [x, g.ints(spec)], {}, [{ dtype: x.dtype, shape: out }])[0];
}

export function reduceNode(op: string, x: Tensor, axes: number[] | undefined, keepdims: boolean): Tensor {
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
  const summed = axes.length ? reduceNode('ReduceSum', g, axes, true) : g;
  return shapeEquals(summed.shape, shape) ? summed : reshape(summed, shape);
}
