/**
 * `n` independent copies of one model in one graph, so that one `session.run` computes what `n`
 * runs of the original would (issue 25 item 3: the policy versions in flight decode in one pass).
 *
 * Copy k's inputs, outputs, intermediate values, node names and symbolic dims are the original's
 * prefixed with `copyPrefix(k)`; the constants (initializers) are shared, since no copy writes
 * them. The copies share no value, so each computes exactly what the original computes on its
 * own feeds: same nodes, same shapes, same kernels (what makes the results the same to the bit).
 */
import type { DimProto, ModelData } from './onnx-proto.js';

/** The name prefix of copy `k`'s inputs and outputs. */
export const copyPrefix = (k: number): string => `c${k}/`;

/** `model` repeated `n` times side by side (see the top of the file). */
export function composeCopies(model: ModelData, n: number): ModelData {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`copies must be an integer >= 1, got ${n}`);
  const shared = new Set(model.initializers.map((t) => t.name));
  const copies = Array.from({ length: n }, (_, k) => {
    const p = copyPrefix(k);
    // '' marks an omitted optional input; a constant is the same tensor in every copy.
    const rename = (name: string) => (name === '' || shared.has(name) ? name : p + name);
    const dim = (d: DimProto) => (typeof d === 'string' ? p + d : d);
    return {
      nodes: model.nodes.map((node) => ({
        ...node,
        name: p + node.name,
        inputs: node.inputs.map(rename),
        outputs: node.outputs.map(rename),
      })),
      inputs: model.inputs.map((v) => ({ ...v, name: p + v.name, shape: v.shape.map(dim) })),
      outputs: model.outputs.map((v) => ({ ...v, name: p + v.name, shape: v.shape.map(dim) })),
    };
  });
  return {
    ...model,
    graphName: `${model.graphName}_x${n}`,
    nodes: copies.flatMap((c) => c.nodes),
    inputs: copies.flatMap((c) => c.inputs),
    outputs: copies.flatMap((c) => c.outputs),
  };
}
