/**
 * Issue 21 item 3: each loss term of the training graph is a registered builder returning its
 * value and its named metrics (src/gpu/losses.ts), and the objective is assembled from what the
 * builders say (scaled by lambda or not), never from their names. A term registered here, like a
 * plugin's, reaches the objective, the values and the metrics; every loss of the trainer-side
 * registry (src/rl/losses.ts) has a graph builder.
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { Graph, ops } from '../src/gpu/graph/index.js';
import { lossGraph, lossTermBuilder, registerLossTermBuilder } from '../src/gpu/losses.js';
import { listLosses } from '../src/rl/losses.js';

t.test('every registered loss name has a graph builder; an unknown one throws naming them', async (t) => {
  for (const name of listLosses()) t.ok(lossTermBuilder(name).output, name);
  t.throws(() => lossTermBuilder('no-such-term'), /no loss term builder 'no-such-term' \(registered: .*grpo/);
  t.throws(
    () =>
      registerLossTermBuilder('grpo', { output: 'x', scaled: false, build: () => ({ loss: undefined! }) }),
    /already registered/,
  );
});

// A term of our own: value = sum of the token logprobs over the loss mask, one metric = its double.
registerLossTermBuilder('test-sum', {
  output: 'sum_loss',
  scaled: true,
  build: (ctx) => {
    const loss = ops.reduceSum(ops.mul(ctx.inp.tokenLogp, ctx.inp.lossMask));
    return { loss, metrics: () => ({ sum_twice: ops.mul(loss, 2) }) };
  },
});

t.test(
  'a registered term reaches the objective (scaled by lambda), the values and the metrics',
  async (t) => {
    // One row, two loss tokens, logp = [ln 0.5, ln 0.25], old = logp (r = 1), A = 1, GRPO row, no AKBE
    // weight: L_GRPO = token mean of -A r = -1; L_AKBE = 0; test-sum = ln 0.5 + ln 0.25 = ln 0.125.
    // loss = L_GRPO + lambda (L_AKBE + test-sum) = -1 + 0.5 ln 0.125.
    const g = new Graph();
    const f = (name: string, shape: number[]) => g.input(name, 'float64', shape);
    const r = lossGraph(
      {
        tokenLogp: f('tok', [1, 2]),
        oldLogp: f('old', [1, 2]),
        lossMask: f('mask', [1, 2]),
        advantages: f('adv', [1]),
        pgWeight: f('pgw', [1]),
        akbeWeight: f('akw', [1]),
      },
      {
        clipEpsLow: f('lo', []),
        clipEpsHigh: f('hi', []),
        dualClipC: f('c', []),
        ratioClamp: f('clamp', []),
        lambda: f('lambda', []),
      },
      {},
      ['grpo', 'akbe-nll', 'test-sum'],
    );
    t.strictSame(
      r.values.map(([n]) => n),
      ['pg_loss', 'akbe_loss', 'sum_loss'],
      'each term under its output name, in term order',
    );
    t.strictSame(
      r.metrics.map(([n]) => n),
      ['clip_frac', 'approx_kl', 'sum_twice'],
      "each term's metrics, in term order (no entropy without the full log-softmax)",
    );
    g.output(r.loss, 'loss');
    for (const [n, v] of [...r.values, ...r.metrics]) g.output(v, n);
    const s = await ort.InferenceSession.create(g.serialize());
    const T = (v: number[], dims: number[]) => new ort.Tensor('float64', Float64Array.from(v), dims);
    const logp = [Math.log(0.5), Math.log(0.25)];
    const out = await s.run({
      tok: T(logp, [1, 2]),
      old: T(logp, [1, 2]),
      mask: T([1, 1], [1, 2]),
      adv: T([1], [1]),
      pgw: T([1], [1]),
      akw: T([0], [1]),
      lo: T([0.2], []),
      hi: T([0.2], []),
      c: T([3], []),
      clamp: T([20], []),
      lambda: T([0.5], []),
    });
    await s.release();
    const v = (n: string) => (out[n].data as Float64Array)[0];
    const near = (got: number, want: number, what: string) =>
      t.ok(Math.abs(got - want) < 1e-12, `${what}: ${got} vs hand-worked ${want}`);
    near(v('pg_loss'), -1, 'L_GRPO');
    near(v('akbe_loss'), 0, 'L_AKBE');
    near(v('sum_loss'), Math.log(0.125), 'the registered term');
    near(v('sum_twice'), 2 * Math.log(0.125), "the registered term's metric");
    near(v('loss'), -1 + 0.5 * Math.log(0.125), 'loss = L_GRPO + lambda (L_AKBE + term)');
  },
);
