/**
 * Indexing: Gather (embedding lookup), GatherElements (pick one logit per row), and the
 * scatter-add ops that are their gradients (ScatterElements with reduction 'add', opset >= 16),
 * so an embedding gradient costs N x D adds instead of a [N, V] one-hot product.
 *
 * Both gradients use ScatterElements, never ScatterND: ORT's CPU ScatterND with reduction 'add'
 * splits the N updated rows across intra-op threads, so two threads adding into one embedding row
 * race (the sum's order, and so its bits, changes run to run once N x D is large enough to be
 * split; test/train-deterministic.test.ts). Its ScatterElements applies the updates to each output
 * element in index order (no two threads share an element), so duplicates always accumulate in
 * the same sequence: the bits ScatterND gives on one thread, on any number of threads.
 */
import { registerGradRules } from '../autodiff.js';
import { A, GraphBuildError, normAxis, type Shape, type Tensor } from '../graph.js';
import { expandTo } from './broadcast.js';
import { reshape, unsqueeze } from './shape.js';

/** data.take(indices, axis): out shape = data[:axis] + indices + data[axis+1:]. */
export function gather(data: Tensor, indices: Tensor, axis = 0): Tensor {
  const ax = normAxis('Gather', axis, data.rank);
  const shape: Shape = [...data.shape.slice(0, ax), ...indices.shape, ...data.shape.slice(ax + 1)];
  return data.graph.addNode('Gather', [data, indices], { axis: A.i(ax) }, [{ dtype: data.dtype, shape }])[0];
}

/** out[i][j] = data[i][indices[i][j]] along `axis`; out has the indices' shape. */
export function gatherElements(data: Tensor, indices: Tensor, axis: number): Tensor {
  const ax = normAxis('GatherElements', axis, data.rank);
  if (indices.rank !== data.rank)
    throw new GraphBuildError('GatherElements', `rank mismatch ${data} vs ${indices}`);
  return data.graph.addNode('GatherElements', [data, indices], { axis: A.i(ax) }, [
    { dtype: data.dtype, shape: indices.shape },
  ])[0];
}

function zerosOf(like: Tensor): Tensor {
  return expandTo(like.graph.scalar(0, like.dtype), like.shape);
}

/** base with `updates` added at `indices` along `axis` (duplicates accumulate). */
export function scatterElementsAdd(base: Tensor, indices: Tensor, updates: Tensor, axis: number): Tensor {
  return base.graph.addNode(
    'ScatterElements',
    [base, indices, updates],
    { axis: A.i(axis), reduction: A.s('add') },
    [{ dtype: base.dtype, shape: base.shape }],
  )[0];
}

/**
 * base with updates[n] added at base[indices[n]] (indices [..., k]; duplicates accumulate). No
 * gradient uses it: on ORT's CPU provider duplicates race across threads (see the file's head);
 * bench/embedding-grad.ts times it against gatherRowsGrad.
 */
export function scatterNDAdd(base: Tensor, indices: Tensor, updates: Tensor): Tensor {
  return base.graph.addNode('ScatterND', [base, indices, updates], { reduction: A.s('add') }, [
    { dtype: base.dtype, shape: base.shape },
  ])[0];
}

/**
 * [N, 1] row indices broadcast to [N, ...row] (each index repeated along its row), the indices
 * ScatterElements wants to add whole rows along axis 0. Expand to [1, ...row] so N may be symbolic.
 */
function rowIndices(flatIdx: Tensor, rows: Shape): Tensor {
  if (rows.length === 0) return reshape(flatIdx, [-1]);
  if (rows.some((d) => typeof d !== 'number'))
    throw new GraphBuildError('Gather', `gradient needs static row dims, got [${rows}]`);
  const g = flatIdx.graph;
  const col = rows.length > 1 ? reshape(flatIdx, [-1, ...rows.map(() => 1)]) : flatIdx;
  return g.addNode('Expand', [col, g.ints([1, ...(rows as number[])])], {}, [
    { dtype: flatIdx.dtype, shape: [flatIdx.shape[0], ...rows] },
  ])[0];
}

/**
 * d loss / d table of `gather(table, idx)` (axis 0) given `g`, its output's gradient: each row of
 * g added into the table row it was read from, duplicates in index order (deterministic).
 */
export function gatherRowsGrad(table: Tensor, idx: Tensor, g: Tensor): Tensor {
  // Rows of the table: flatten the indices to [N, 1] and the gradient to [N, ...row].
  const rows = table.shape.slice(1);
  const flatIdx = unsqueeze(reshape(idx, [-1]), [1]); // [N, 1]
  const flatG = reshape(g, [-1, ...rows]); // [N, ...row]
  return scatterElementsAdd(zerosOf(table), rowIndices(flatIdx, rows), flatG, 0);
}

registerGradRules({
  Gather: ([g], { inputs: [data, idx], attrs }) => {
    if (attrs.axis.v !== 0) throw new GraphBuildError('Gather', 'gradient implemented for axis 0 only');
    return [gatherRowsGrad(data!, idx!, g!), null];
  },
  GatherElements: ([g], { inputs: [data, idx], attrs }) => [
    scatterElementsAdd(zerosOf(data!), idx!, g!, attrs.axis.v as number),
    null,
  ],
});
