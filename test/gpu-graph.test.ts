/**
 * The graph builder itself: shape tracking, errors at build time, pruning, naming, symbolic dims,
 * and that the hand-written protobuf loads in onnxruntime.
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { Graph, GraphBuildError, gradients, ops } from '../src/gpu/graph/index.js';

t.test('shapes are tracked through broadcasting, matmul and reshape', async (t) => {
  const g = new Graph();
  const x = g.input('x', 'float32', ['B', 3, 4]);
  const w = g.input('w', 'float32', [4, 6]);
  const y = ops.add(ops.matmul(x, w), g.input('b', 'float32', [6]));
  t.same(y.shape, ['B', 3, 6]);
  t.same(ops.reshape(y, [0, 0, 2, 3]).shape, ['B', 3, 2, 3]);
  t.same(ops.reduceSum(y, [1]).shape, ['B', 6]);
  t.same(ops.transpose(y, [2, 0, 1]).shape, [6, 'B', 3]);
});

t.test('shape mismatches throw GraphBuildError at build time, naming the op', async (t) => {
  const g = new Graph();
  const a = g.input('a', 'float32', [2, 3]);
  t.throws(() => ops.matmul(a, g.input('b', 'float32', [4, 5])), GraphBuildError);
  t.throws(() => ops.add(a, g.input('c', 'float32', [4])), {
    name: 'GraphBuildError',
    message: /^Add: cannot broadcast/,
  });
  t.throws(() => ops.add(a, g.input('d', 'float64', [3])), /dtype mismatch/);
  t.throws(() => g.input('a', 'float32', [1]), /duplicate tensor name 'a'/);
});

t.test('serialised graphs load in ORT; dead nodes are pruned; symbolic dims take any size', async (t) => {
  const g = new Graph();
  const x = g.input('x', 'float32', ['n']);
  ops.exp(ops.mul(x, 100)); // dead: no output depends on it
  g.output(ops.add(ops.mul(x, 2), 1), 'y');
  g.output(x, 'x_copy'); // an input as an output goes through Identity
  const model = g.toModelProto();
  t.notOk(
    model.nodes.some((n) => n.opType === 'Exp'),
    'dead Exp pruned',
  );
  const s = await ort.InferenceSession.create(g.serialize());
  for (const n of [1, 5]) {
    const r = await s.run({
      x: new ort.Tensor(
        'float32',
        Float32Array.from({ length: n }, (_, i) => i),
        [n],
      ),
    });
    t.same(
      Array.from(r.y.data as Float32Array),
      Array.from({ length: n }, (_, i) => 2 * i + 1),
    );
    t.same(
      Array.from(r.x_copy.data as Float32Array),
      Array.from({ length: n }, (_, i) => i),
    );
  }
});

t.test('gradients of a loss that ignores an input are zeros of its shape', async (t) => {
  const g = new Graph();
  const x = g.input('x', 'float64', [2, 2]);
  const unused = g.input('u', 'float64', [3]);
  const [gx, gu] = gradients(ops.reduceSum(ops.mul(x, x)), [x, unused]);
  g.output(gx, 'gx');
  g.output(gu, 'gu');
  const s = await ort.InferenceSession.create(g.serialize());
  const r = await s.run({
    x: new ort.Tensor('float64', Float64Array.from([1, 2, 3, 4]), [2, 2]),
    u: new ort.Tensor('float64', new Float64Array(3), [3]),
  });
  t.same(Array.from(r.gx.data as Float64Array), [2, 4, 6, 8]);
  t.same(Array.from(r.gu.data as Float64Array), [0, 0, 0]);
});

t.test('a tensor used twice accumulates both gradient paths', async (t) => {
  const g = new Graph();
  const x = g.input('x', 'float64', [3]);
  const [gx] = gradients(ops.reduceSum(ops.add(ops.mul(x, 3), ops.exp(x))), [x]);
  g.output(gx, 'gx');
  const s = await ort.InferenceSession.create(g.serialize());
  const r = await s.run({ x: new ort.Tensor('float64', Float64Array.from([0, 1, 2]), [3]) });
  const expected = [0, 1, 2].map((v) => 3 + Math.exp(v));
  const got = Array.from(r.gx.data as Float64Array);
  t.ok(
    got.every((v, i) => Math.abs(v - expected[i]) < 1e-12),
    `${got} vs ${expected}`,
  );
});
