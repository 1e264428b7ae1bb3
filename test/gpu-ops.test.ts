/**
 * Every gradient rule against central finite differences in float64 (relative error <= 1e-6),
 * forwards against plain-JS references where the op is not obvious. Edge values included.
 */
import t from 'tap';
import { Graph, gradients, MissingGradientError, ops } from '../src/gpu/graph/index.js';
import { gradcheck } from './helpers/gradcheck.js';

const { add, sub, mul, div, pow, min, max, neg, exp, log, sqrt, tanh, sigmoid, clip, where, cast } = ops;
const pos = (n: number, lo = 0.5) => Array.from({ length: n }, (_, i) => lo + ((i * 0.37) % 1.7));

// ---- elementwise, with broadcasting ----
t.test('Add broadcasts [2,3] + [3] + [2,1]', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 3] }, b: { shape: [3] }, c: { shape: [2, 1] } },
    build: (x) => add(add(x.a, x.b), x.c),
  }),
);
t.test('Sub broadcasts [2,1,3] - [4,1]', (t) =>
  gradcheck(t, { inputs: { a: { shape: [2, 1, 3] }, b: { shape: [4, 1] } }, build: (x) => sub(x.a, x.b) }),
);
t.test('Mul broadcasts [3,1] * [1,4], zeros included', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [3, 1], values: [0, 1.5, -2] }, b: { shape: [1, 4] } },
    build: (x) => mul(x.a, x.b),
  }),
);
t.test('Div broadcasts [2,3] / [3]', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 3] }, b: { shape: [3], values: [0.7, -1.3, 2] } },
    build: (x) => div(x.a, x.b),
  }),
);
t.test('Pow with tensor base and exponent', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [4], values: pos(4) }, b: { shape: [4] } },
    build: (x) => pow(x.a, x.b),
  }),
);
t.test('Pow with a constant exponent', (t) =>
  gradcheck(t, { inputs: { a: { shape: [5], values: [-2, -0.5, 0.3, 1, 3] } }, build: (x) => pow(x.a, 3) }),
);
t.test('Min and Max pick the right side', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [4], values: [1, -2, 3, 0.5] }, b: { shape: [4], values: [2, -3, 1, 0.7] } },
    build: (x) => add(min(x.a, x.b), mul(max(x.a, x.b), 3)),
    expect: ({ a, b }) => a.map((v, i) => Math.min(v, b[i]) + 3 * Math.max(v, b[i])),
  }),
);
t.test('Min broadcasts a scalar', (t) =>
  gradcheck(t, { inputs: { a: { shape: [2, 3] }, s: { shape: [] } }, build: (x) => min(x.a, x.s) }),
);
t.test('Neg, Exp, Tanh, Sigmoid (large magnitudes included)', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [6], values: [0, 1, -1, 5, -8, 0.3] } },
    build: (x) => add(add(neg(x.a), exp(x.a)), add(tanh(x.a), sigmoid(x.a))),
  }),
);
t.test('Log and Sqrt on small and large positives', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [4], values: [1e-2, 0.5, 3, 100] } },
    build: (x) => add(log(x.a), sqrt(x.a)),
    h: 1e-7,
  }),
);
t.test('Abs away from 0', (t) =>
  gradcheck(t, { inputs: { a: { shape: [3], values: [-2, 0.5, 3] } }, build: (x) => ops.abs(x.a) }),
);
t.test('Sin and Cos (rotary embeddings) match Math.sin / Math.cos, large angles included', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [4], values: [0, 0.7, -2, 1000.5] } },
    build: (x) => add(ops.sin(x.a), mul(ops.cos(x.a), 2)),
    expect: ({ a }) => a.map((v) => Math.sin(v) + 2 * Math.cos(v)),
    atol: 1e-12,
  }),
);
t.test('Clip passes the gradient inside, routes it to the bounds outside', (t) =>
  gradcheck(t, {
    inputs: {
      a: { shape: [5], values: [-3, -0.5, 0, 0.5, 3] },
      lo: { shape: [], values: [-1] },
      hi: { shape: [], values: [1] },
    },
    build: (x) => clip(x.a, x.lo, x.hi),
    expect: ({ a }) => a.map((v) => Math.min(1, Math.max(-1, v))),
  }),
);
t.test('Where selects by a mask (causal-mask shape)', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [3, 3] }, b: { shape: [] } },
    build: (x, g) => where(g.constant([1, 0, 0, 1, 1, 0, 1, 1, 1], 'bool', [3, 3]), x.a, x.b),
  }),
);
t.test('Cast round trip float64 -> float64 keeps gradients', (t) =>
  gradcheck(t, { inputs: { a: { shape: [3] } }, build: (x) => mul(cast(x.a, 'float64'), 2) }),
);

// ---- matrix products ----
t.test('MatMul batched [2,3,4] @ [4,5]', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 3, 4] }, b: { shape: [4, 5] } },
    build: (x) => ops.matmul(x.a, x.b),
  }),
);
t.test('MatMul batch-broadcast [2,1,3,4] @ [3,4,2]', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 1, 3, 4] }, b: { shape: [3, 4, 2] } },
    build: (x) => ops.matmul(x.a, x.b),
  }),
);
for (const [transA, transB] of [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
]) {
  t.test(`Gemm transA=${transA} transB=${transB} with alpha, beta and a row bias`, (t) =>
    gradcheck(t, {
      inputs: {
        a: { shape: transA ? [4, 3] : [3, 4] },
        b: { shape: transB ? [5, 4] : [4, 5] },
        c: { shape: [5] },
      },
      build: (x) => ops.gemm(x.a, x.b, x.c, { transA, transB, alpha: 0.7, beta: 1.3 }),
    }),
  );
}

// ---- data movement ----
t.test('Transpose [2,3,4] perm [2,0,1]', (t) =>
  gradcheck(t, { inputs: { a: { shape: [2, 3, 4] } }, build: (x) => ops.transpose(x.a, [2, 0, 1]) }),
);
t.test('Reshape [2,6] -> [3,-1]', (t) =>
  gradcheck(t, { inputs: { a: { shape: [2, 6] } }, build: (x) => ops.reshape(x.a, [3, -1]) }),
);
t.test('Concat on axis 1 and Slice back', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 2] }, b: { shape: [2, 3] } },
    build: (x) => mul(ops.slice(ops.concat([x.a, x.b], 1), [1], [4], [1]), 2),
  }),
);
t.test('Split into three with one piece unused', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 6] } },
    build: (x) => {
      const [p, q] = ops.split(x.a, 1, [2, 2, 2]);
      return mul(p, q);
    },
  }),
);
t.test('Unsqueeze, Squeeze and Expand', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [3] } },
    build: (x) => ops.expandTo(ops.unsqueeze(ops.squeeze(ops.unsqueeze(x.a, [0]), [0]), [1]), [3, 4]),
  }),
);

// ---- indexing ----
t.test('Gather rows with repeated indices accumulates (embedding)', (t) =>
  gradcheck(t, {
    inputs: { e: { shape: [4, 3] }, i: { shape: [2, 3], values: [0, 2, 2, 3, 0, 0], dtype: 'int64' } },
    build: (x) => ops.gather(x.e, x.i),
  }),
);
t.test('Gather from a rank-3 table: whole [2, 2] rows accumulate', (t) =>
  gradcheck(t, {
    inputs: { e: { shape: [3, 2, 2] }, i: { shape: [4], values: [2, 0, 2, 2], dtype: 'int64' } },
    build: (x) => ops.gather(x.e, x.i),
  }),
);
t.test('Gather from a rank-1 table (scalar rows)', (t) =>
  gradcheck(t, {
    inputs: { e: { shape: [5] }, i: { shape: [2, 2], values: [4, 1, 4, 0], dtype: 'int64' } },
    build: (x) => ops.gather(x.e, x.i),
    expect: (x) => [4, 1, 4, 0].map((k) => x.e[k]),
  }),
);
t.test('GatherElements picks entries per row, repeats accumulate', (t) =>
  gradcheck(t, {
    inputs: {
      a: { shape: [3, 4], values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] },
      i: { shape: [3, 2], values: [3, 3, 1, 2, 2, 0], dtype: 'int64' },
    },
    build: (x) => ops.gatherElements(x.a, x.i, 1),
    expect: () => [3, 3, 5, 6, 10, 8],
  }),
);

// ---- reductions ----
t.test('ReduceSum over axes 0,2 without keepdims', (t) =>
  gradcheck(t, { inputs: { a: { shape: [2, 3, 4] } }, build: (x) => ops.reduceSum(x.a, [0, 2]) }),
);
t.test('ReduceMean over the last axis with keepdims', (t) =>
  gradcheck(t, { inputs: { a: { shape: [2, 3] } }, build: (x) => ops.reduceMean(x.a, [-1], true) }),
);
t.test('ReduceMax over rows (distinct values)', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 3], values: [1, 5, 2, -1, -3, -2] } },
    build: (x) => ops.reduceMax(x.a, [1]),
    expect: () => [5, -1],
  }),
);

// ---- neural-network ops ----
t.test('Softmax over the last axis, large logits included', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [2, 4], values: [0, 1, 2, 3, 50, -50, 0, 49] } },
    build: (x) => ops.softmax(x.a),
  }),
);
t.test('LogSoftmax over axis 1 of a 3-D tensor', (t) =>
  gradcheck(t, { inputs: { a: { shape: [2, 3, 2] } }, build: (x) => ops.logSoftmax(x.a, 1) }),
);
t.test('LayerNormalization (float64 expansion, same rule) with scale and bias', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [3, 5] }, s: { shape: [5] }, b: { shape: [5] } },
    build: (x) => ops.layerNorm(x.a, x.s, x.b, 1e-5),
  }),
);
t.test('LayerNormalization of a nearly constant row', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [1, 4], values: [1, 1.001, 0.999, 1] }, s: { shape: [4] }, b: { shape: [4] } },
    build: (x) => ops.layerNorm(x.a, x.s, x.b, 1e-5),
    h: 1e-7,
    rtol: 1e-5,
  }),
);
t.test('GELU tanh form (GPT-2 gelu_new) matches the formula', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [6], values: [-6, -1, 0, 0.5, 2, 8] } },
    build: (x) => ops.gelu(x.a, 'tanh'),
    expect: ({ a }) =>
      a.map((v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)))),
  }),
);

t.test('GELU erf form in float32 (Erf has no float64 kernel): loose tolerance', (t) =>
  gradcheck(t, {
    inputs: { a: { shape: [5], values: [-3, -0.5, 0, 1, 2.5], dtype: 'float32' } },
    build: (x) => ops.gelu(x.a, 'erf'),
    float32: true,
    h: 1e-2,
    rtol: 2e-3,
    atol: 1e-6,
    expect: ({ a }) => a.map((v) => 0.5 * v * (1 + erfRef(v / Math.SQRT2))),
  }),
);

// Abramowitz-Stegun 7.1.26 is only 1e-7 accurate: use a series, exact to double precision for |x| < 3.
function erfRef(x: number): number {
  let sum = 0;
  let term = x;
  for (let n = 0; n < 100; n++) {
    sum += term / (2 * n + 1);
    term *= (-x * x) / (n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

t.test('a node without a gradient rule throws MissingGradientError naming the op', async (t) => {
  const g = new Graph();
  const x = g.input('x', 'float64', [3]);
  const [y] = g.addNode('Floor', [x], {}, [{ dtype: 'float64', shape: [3] }]);
  t.throws(() => gradients(ops.reduceSum(y), [x]), new MissingGradientError('Floor'));
});
