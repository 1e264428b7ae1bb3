import { Graph } from '../../src/gpu/graph/graph.js';

/** y = exp(relu(a @ b)): three nodes, a [N, K] and b [K, M] float32 inputs. */
export function matmulReluExpModel(k = 4, m = 3): Uint8Array {
  const g = new Graph({ name: 'tiny' });
  const a = g.input('a', 'float32', ['N', k]);
  const b = g.input('b', 'float32', [k, m]);
  const [c] = g.addNode('MatMul', [a, b], {}, [{ dtype: 'float32', shape: ['N', m] }]);
  const [d] = g.addNode('Relu', [c], {}, [{ dtype: 'float32', shape: ['N', m] }]);
  const [e] = g.addNode('Exp', [d], {}, [{ dtype: 'float32', shape: ['N', m] }]);
  g.output(e, 'y');
  return g.serialize();
}
