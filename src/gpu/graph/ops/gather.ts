/**
 * Indexing: Gather (embedding lookup), GatherElements (pick one logit per row), and the
 * scatter-add ops that are their gradients (ScatterND / ScatterElements with reduction 'add',
 * opset >= 16), so an embedding gradient costs N x D adds instead of a [N, V] one-hot product.
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

/** base with updates[n] added at base[indices[n]] (indices [..., k]; duplicates accumulate). */
export function scatterNDAdd(base: Tensor, indices: Tensor, updates: Tensor): Tensor {
  return base.graph.addNode('ScatterND', [base, indices, updates], { reduction: A.s('add') }, [
    { dtype: base.dtype, shape: base.shape },
  ])[0];
}

registerGradRules({
  Gather: ([g], { inputs: [data, idx], attrs }) => {
    if (attrs.axis.v !== 0) throw new GraphBuildError('Gather', 'gradient implemented for axis 0 only');
    // Rows of the table: flatten the indices to [N, 1] and the gradient to [N, ...row].
    const rows = data!.shape.slice(1);
    const flatIdx = unsqueeze(reshape(idx!, [-1]), [1]); // [N, 1]
    const flatG = reshape(g!, [-1, ...rows]); // [N, ...row]
    return [scatterNDAdd(zerosOf(data!), flatIdx, flatG), null];
  },
  GatherElements: ([g], { inputs: [data, idx], attrs }) => [
    scatterElementsAdd(zerosOf(data!), idx!, g!, attrs.axis.v as number),
    null,
  ],
});
