/**
 * One helper for every op test (house rule 9): builds a float64 graph computing
 * loss = sum(op(inputs) * W) with fixed random weights W, runs the forward and the autodiff
 * gradient in one ORT session, and compares
 *   - the op's output with an optional plain-JS reference (`expect`, absolute tolerance `atol`),
 *   - each gradient with central finite differences of the loss (relative error, max-norm:
 *     max|analytic - numeric| / max|numeric| <= rtol).
 */
import ort from 'onnxruntime-node';
import type { Test } from 'tap';
import { type DType, Graph, gradients, ops, type Tensor } from '../../src/gpu/graph/index.js';
import { Rng } from '../../src/util/rng.js';

export interface InputSpec {
  shape: number[];
  /** Explicit values (edge cases); default: standard normal draws. */
  values?: number[];
  dtype?: DType;
  /** Exclude from the gradient check (e.g. a hyperparameter). */
  noGrad?: boolean;
}

export interface GradcheckCase {
  inputs: Record<string, InputSpec>;
  build: (x: Record<string, Tensor>, g: Graph) => Tensor;
  /** Plain-JS forward reference: flat output values from flat input values. */
  expect?: (x: Record<string, number[]>) => number[];
  atol?: number;
  rtol?: number;
  /** Finite-difference step. */
  h?: number;
  seed?: number;
  /** Check gradients of float32 inputs (for ops without a float64 kernel; loosen h and rtol). */
  float32?: boolean;
}

export interface GradcheckResult {
  output: number[];
  /** Worst relative gradient error per input. */
  errors: Record<string, number>;
  forwardError: number;
}

type Assert = Pick<Test, 'ok'>;

const ArrayOf = { float64: Float64Array, float32: Float32Array } as const;

function toOrt(dtype: DType, values: number[], shape: number[]): ort.Tensor {
  if (dtype === 'int64') return new ort.Tensor('int64', BigInt64Array.from(values, BigInt), shape);
  if (dtype === 'int32') return new ort.Tensor('int32', Int32Array.from(values), shape);
  if (dtype === 'bool') return new ort.Tensor('bool', Uint8Array.from(values), shape);
  if (dtype !== 'float32' && dtype !== 'float64') throw new Error(`gradcheck: no ${dtype} inputs`);
  return new ort.Tensor(dtype, ArrayOf[dtype].from(values), shape);
}

export async function gradcheck(t: Assert, c: GradcheckCase): Promise<GradcheckResult> {
  const rng = new Rng(c.seed ?? 1);
  const rtol = c.rtol ?? 1e-6;
  const h = c.h ?? 1e-5;
  const g = new Graph({ name: 'gradcheck' });
  const values: Record<string, number[]> = {};
  const tensors: Record<string, Tensor> = {};
  for (const [name, s] of Object.entries(c.inputs)) {
    const dtype = s.dtype ?? 'float64';
    const n = s.shape.reduce((a, b) => a * b, 1);
    values[name] = s.values ? [...s.values] : Array.from({ length: n }, () => rng.normal());
    if (values[name].length !== n)
      throw new Error(`gradcheck: input ${name} has ${values[name].length} values for [${s.shape}]`);
    tensors[name] = g.input(name, dtype, s.shape);
  }
  const y = c.build(tensors, g);
  const yShape = y.shape as number[];
  const w = g.constant(
    Array.from({ length: y.size }, () => rng.normal()),
    y.dtype,
    yShape,
  );
  const loss = ops.reduceSum(ops.mul(y, w));
  const wrt = Object.entries(c.inputs)
    .filter(([, s]) => (s.dtype ?? 'float64') === (c.float32 ? 'float32' : 'float64') && !s.noGrad)
    .map(([name]) => name);
  const grads = gradients(
    loss,
    wrt.map((n) => tensors[n]),
  );
  g.output(loss, 'loss');
  g.output(y, 'y');
  grads.forEach((gr, k) => {
    g.output(gr, `grad_${wrt[k]}`);
  });
  const session = await ort.InferenceSession.create(g.serialize());
  const feeds = (vals: Record<string, number[]>) =>
    Object.fromEntries(
      Object.entries(c.inputs).map(([name, s]) => [name, toOrt(s.dtype ?? 'float64', vals[name], s.shape)]),
    );
  try {
    const base = await session.run(feeds(values));
    const output = Array.from(base.y.data as Float64Array | Float32Array);
    let forwardError = 0;
    if (c.expect) {
      const ref = c.expect(values);
      t.ok(ref.length === output.length, `reference gives ${ref.length} values, op gives ${output.length}`);
      for (let i = 0; i < ref.length; i++)
        forwardError = Math.max(forwardError, Math.abs(ref[i] - output[i]));
      t.ok(forwardError <= (c.atol ?? 1e-9), `forward max abs error ${forwardError} <= ${c.atol ?? 1e-9}`);
    }
    const errors: Record<string, number> = {};
    for (const name of wrt) {
      const analytic = Array.from(base[`grad_${name}`].data as Float64Array | Float32Array);
      const numeric: number[] = [];
      for (let i = 0; i < values[name].length; i++) {
        const orig = values[name][i];
        values[name][i] = orig + h;
        const up = (await session.run(feeds(values))).loss.data[0] as number;
        values[name][i] = orig - h;
        const down = (await session.run(feeds(values))).loss.data[0] as number;
        values[name][i] = orig;
        numeric.push((up - down) / (2 * h));
      }
      const scale = Math.max(...numeric.map(Math.abs), 1e-12);
      const err = Math.max(...numeric.map((v, i) => Math.abs(v - analytic[i]))) / scale;
      errors[name] = err;
      t.ok(err <= rtol, `d loss / d ${name}: relative error ${err.toExponential(2)} <= ${rtol}`);
    }
    return { output, errors, forwardError };
  } finally {
    await session.release();
  }
}
