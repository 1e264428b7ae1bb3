/**
 * Data movement: Reshape, Transpose, Concat, Split, Slice, Pad, Unsqueeze, Squeeze, Identity,
 * Shape. Static axes/shapes are int64 constants so ORT can fold them. Symbolic dims flow through
 * where a dim is only copied (Reshape's 0, Transpose, Concat's other axes).
 */
import { registerGradRules } from '../autodiff.js';
import { A, type Dim, GraphBuildError, normAxis, type Shape, type Tensor } from '../graph.js';
import { expandTo, reshape, staticDims, sumTo } from './broadcast.js';

export { reshape };

/** Reshape to `like`'s shape, through a Shape node when it has symbolic dims. */
export function reshapeLike(x: Tensor, like: Tensor): Tensor {
  if (staticDims(like.shape)) return reshape(x, like.shape);
  return x.graph.addNode('Reshape', [x, shapeOf(like)], {}, [{ dtype: x.dtype, shape: like.shape }])[0];
}

export function shapeOf(x: Tensor): Tensor {
  return x.graph.addNode('Shape', [x], {}, [{ dtype: 'int64', shape: [x.rank] }])[0];
}

export function transpose(x: Tensor, perm: number[]): Tensor {
  if (perm.length !== x.rank) throw new GraphBuildError('Transpose', `perm [${perm}] does not fit ${x}`);
  return x.graph.addNode('Transpose', [x], { perm: A.ints(perm) }, [
    { dtype: x.dtype, shape: perm.map((p) => x.shape[p]) },
  ])[0];
}

function addDims(a: Dim, b: Dim): Dim {
  return typeof a === 'number' && typeof b === 'number' ? a + b : `${a}+${b}`;
}

export function concat(xs: Tensor[], axis: number): Tensor {
  const x0 = xs[0];
  const ax = normAxis('Concat', axis, x0.rank);
  const shape = [...x0.shape];
  for (const x of xs.slice(1)) {
    if (x.rank !== x0.rank || x.shape.some((d, i) => i !== ax && d !== x0.shape[i])) {
      throw new GraphBuildError('Concat', `shapes differ off axis ${ax}: ${x0} vs ${x}`);
    }
    shape[ax] = addDims(shape[ax], x.shape[ax]);
  }
  return x0.graph.addNode('Concat', xs, { axis: A.i(ax) }, [{ dtype: x0.dtype, shape }])[0];
}

/** Splits along `axis` into pieces of the given static sizes. */
export function split(x: Tensor, axis: number, sizes: number[]): Tensor[] {
  const ax = normAxis('Split', axis, x.rank);
  if (typeof x.shape[ax] === 'number' && sizes.reduce((a, b) => a + b, 0) !== x.shape[ax]) {
    throw new GraphBuildError('Split', `sizes [${sizes}] do not sum to dim ${ax} of ${x}`);
  }
  const outs = sizes.map((s) => ({ dtype: x.dtype, shape: x.shape.map((d, i) => (i === ax ? s : d)) }));
  return x.graph.addNode('Split', [x, x.graph.ints(sizes)], { axis: A.i(ax) }, outs);
}

/** Static slice x[starts:ends] on `axes` (step 1; ends clamp like Python). */
export function slice(x: Tensor, starts: number[], ends: number[], axes: number[]): Tensor {
  const g = x.graph;
  const shape = [...x.shape];
  const ax = axes.map((a) => normAxis('Slice', a, x.rank));
  ax.forEach((a, k) => {
    const d = shape[a];
    if (typeof d !== 'number') {
      // x[-k:] has k elements whatever the dim (assuming dim >= k); anything else is unknown.
      const tail = starts[k] < 0 && ends[k] >= Number.MAX_SAFE_INTEGER;
      shape[a] = tail ? -starts[k] : g.freshName('dim');
      return;
    }
    const clampIdx = (v: number) => Math.min(Math.max(v < 0 ? v + d : v, 0), d);
    shape[a] = Math.max(0, clampIdx(ends[k]) - clampIdx(starts[k]));
  });
  return g.addNode('Slice', [x, g.ints(starts), g.ints(ends), g.ints(ax)], {}, [
    { dtype: x.dtype, shape },
  ])[0];
}

/** Zero padding: `pads` = [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}]. */
export function pad(x: Tensor, pads: number[]): Tensor {
  const r = x.rank;
  const shape = x.shape.map((d, i) => (typeof d === 'number' ? d + pads[i] + pads[i + r] : d));
  return x.graph.addNode('Pad', [x, x.graph.ints(pads)], {}, [{ dtype: x.dtype, shape }])[0];
}

export function unsqueeze(x: Tensor, axes: number[]): Tensor {
  const r = x.rank + axes.length;
  const ax = axes.map((a) => normAxis('Unsqueeze', a, r));
  const shape: Shape = [];
  let k = 0;
  for (let i = 0; i < r; i++) shape.push(ax.includes(i) ? 1 : x.shape[k++]);
  return x.graph.addNode('Unsqueeze', [x, x.graph.ints(ax)], {}, [{ dtype: x.dtype, shape }])[0];
}

export function squeeze(x: Tensor, axes: number[]): Tensor {
  const ax = axes.map((a) => normAxis('Squeeze', a, x.rank));
  for (const a of ax) if (x.shape[a] !== 1) throw new GraphBuildError('Squeeze', `dim ${a} of ${x} is not 1`);
  const shape = x.shape.filter((_, i) => !ax.includes(i));
  return x.graph.addNode('Squeeze', [x, x.graph.ints(ax)], {}, [{ dtype: x.dtype, shape }])[0];
}

export function identity(x: Tensor): Tensor {
  return x.graph.addNode('Identity', [x], {}, [{ dtype: x.dtype, shape: x.shape }])[0];
}

export const expand = expandTo;

// ---- gradients ----

function zeros(like: Tensor): Tensor {
  return expandTo(like.graph.scalar(0, like.dtype), like.shape);
}

const inversePerm = (perm: number[]) => perm.map((_, i) => perm.indexOf(i));

registerGradRules({
  Reshape: ([g], { inputs: [x] }) => [reshapeLike(g!, x!), null],
  Unsqueeze: ([g], { inputs: [x] }) => [reshapeLike(g!, x!), null],
  Squeeze: ([g], { inputs: [x] }) => [reshapeLike(g!, x!), null],
  Identity: ([g]) => [g],
  Transpose: ([g], { attrs }) => [transpose(g!, inversePerm(attrs.perm.v as number[]))],
  Concat: ([g], { inputs, attrs }, needs) => {
    const ax = attrs.axis.v as number;
    let start = 0;
    return inputs.map((x, k) => {
      const d = x!.shape[ax];
      if (typeof d !== 'number')
        throw new GraphBuildError('Concat', 'gradient needs static sizes on the concat axis');
      const piece = needs[k] ? slice(g!, [start], [start + d], [ax]) : null;
      start += d;
      return piece;
    });
  },
  Split: (gy, { outputs, attrs }) => {
    const parts = gy.map((gi, k) => gi ?? zeros(outputs[k]));
    return [concat(parts, attrs.axis.v as number), null];
  },
  Slice: ([g], { inputs: [x, starts, , axes] }) => {
    const gr = x!.graph;
    if (!staticDims(x!.shape)) throw new GraphBuildError('Slice', 'gradient needs static shapes');
    const s = gr.constantValues(starts!);
    const ax = gr.constantValues(axes!);
    const pads = new Array(2 * x!.rank).fill(0);
    ax.forEach((a, k) => {
      const d = x!.shape[a] as number;
      const begin = Math.min(Math.max(s[k] < 0 ? s[k] + d : s[k], 0), d);
      pads[a] = begin;
      pads[a + x!.rank] = d - begin - (g!.shape[a] as number);
    });
    return [pad(g!, pads), null, null, null];
  },
  Pad: ([g], { inputs: [x, pads] }) => {
    const p = x!.graph.constantValues(pads!);
    const axes = x!.shape.map((_, i) => i);
    return [
      slice(
        g!,
        axes.map((i) => p[i]),
        axes.map((i) => p[i] + (x!.shape[i] as number)),
        axes,
      ),
      null,
    ];
  },
  Shape: () => [null],
  Expand: ([g], { inputs: [x] }) => [sumTo(g!, x!.shape), null],
});

/** Dimension `axis` of x as an int64 scalar (Shape then Gather): for graphs with symbolic dims. */
export function dimOf(x: Tensor, axis: number): Tensor {
  const g = x.graph;
  const s = shapeOf(x);
  return g.addNode(
    'Gather',
    [s, g.constant(normAxis('dimOf', axis, x.rank), 'int64', [])],
    { axis: A.i(0) },
    [{ dtype: 'int64', shape: [] }],
  )[0];
}

/** [start, start + delta, ..., limit) from int64 scalars (ONNX Range); not differentiable. */
export function range(start: Tensor, limit: Tensor, delta = 1): Tensor {
  const g = start.graph;
  return g.addNode('Range', [start, limit, g.scalar(delta, start.dtype)], {}, [
    { dtype: start.dtype, shape: [g.freshName('range')] },
  ])[0];
}
