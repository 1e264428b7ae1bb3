/**
 * Neural-network ops that ORT runs as single fused kernels and that therefore get their own
 * rule: Softmax, LogSoftmax, LayerNormalization (opset 17), Gelu (opset 20, tanh form). Where ORT
 * lacks a float64 kernel the node is expanded into primitives (Graph.composite) and keeps its rule.
 */
import { MissingGradientError, registerGradRules } from '../autodiff.js';
import { A, normAxis, type Tensor } from '../graph.js';
import { sumTo } from './broadcast.js';
import { add, div, erf, exp, mul, sigmoid, sqrt, sub, tanh } from './elementwise.js';
import { reduceMean, reduceSum } from './reduce.js';

export function softmax(x: Tensor, axis = -1): Tensor {
  return x.graph.addNode('Softmax', [x], { axis: A.i(normAxis('Softmax', axis, x.rank)) }, [
    { dtype: x.dtype, shape: x.shape },
  ])[0];
}

export function logSoftmax(x: Tensor, axis = -1): Tensor {
  return x.graph.addNode('LogSoftmax', [x], { axis: A.i(normAxis('LogSoftmax', axis, x.rank)) }, [
    { dtype: x.dtype, shape: x.shape },
  ])[0];
}

/**
 * LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * scale + bias, scale/bias [D].
 * Mean and 1/std are kept as extra outputs ([..., 1]) for the backward pass.
 */
export function layerNorm(x: Tensor, scale: Tensor, bias: Tensor, epsilon: number): Tensor {
  const g = x.graph;
  const attrs = { axis: A.i(-1), epsilon: A.f(epsilon) };
  const stat = { dtype: x.dtype, shape: [...x.shape.slice(0, -1), 1] };
  if (x.dtype === 'float64') {
    // ORT has no float64 LayerNormalization kernel: same node on the tape, primitives in the file.
    return g.composite('LayerNormalization', [x, scale, bias], attrs, () => {
      const mean = reduceMean(x, [-1], true); // [..., 1]
      const centered = sub(x, mean);
      const inv = div(1, sqrt(add(reduceMean(mul(centered, centered), [-1], true), epsilon))); // [..., 1]
      return [add(mul(mul(centered, inv), scale), bias), mean, inv];
    })[0];
  }
  return g.addNode('LayerNormalization', [x, scale, bias], attrs, [
    { dtype: x.dtype, shape: x.shape },
    stat,
    stat,
  ])[0];
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const GELU_A = 0.044715;

/**
 * GELU. 'tanh' is GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), one ONNX
 * Gelu node (opset 20, approximate='tanh') with its own rule; float64 graphs expand it into
 * Mul/Add/Tanh (no float64 kernel). 'erf' is the exact form 0.5 x (1 + erf(x / sqrt 2)), a
 * composite of primitives (Erf has no float64 kernel either, so it is checked in float32).
 */
export function gelu(x: Tensor, form: 'tanh' | 'erf' = 'tanh'): Tensor {
  if (form === 'erf') return mul(mul(x, 0.5), add(erf(mul(x, Math.SQRT1_2)), 1));
  const g = x.graph;
  const attrs = { approximate: A.s('tanh') };
  if (x.dtype === 'float64') {
    return g.composite('Gelu', [x], attrs, () => {
      const inner = mul(x, add(mul(mul(x, x), SQRT_2_OVER_PI * GELU_A), SQRT_2_OVER_PI));
      return [mul(x, add(mul(tanh(inner), 0.5), 0.5))];
    })[0];
  }
  return g.addNode('Gelu', [x], attrs, [{ dtype: x.dtype, shape: x.shape }])[0];
}

registerGradRules({
  // y = x p with p = 0.5 (1 + tanh u) = sigmoid(2u), u = c (x + a x^3):
  // dy/dx = p + x p (1 - p) 2u' = p (1 + x (1 - p) (2c + 6ca x^2))   (13 elementwise ops)
  Gelu: ([g], { inputs: [x], attrs }) => {
    if (attrs.approximate.v !== 'tanh') throw new MissingGradientError('Gelu(approximate=none)');
    const c = SQRT_2_OVER_PI;
    const x2 = mul(x!, x!);
    const p = sigmoid(mul(x!, add(mul(x2, 2 * c * GELU_A), 2 * c))); // sigmoid(2u)
    const slope = add(mul(x2, 6 * c * GELU_A), 2 * c); // 2u'
    return [mul(g!, mul(p, add(mul(mul(x!, sub(1, p)), slope), 1)))];
  },
  // y = softmax(x): dx = y * (g - sum(g * y))
  Softmax: ([g], { outputs: [y], attrs }) => {
    const ax = attrs.axis.v as number;
    return [mul(y, sub(g!, reduceSum(mul(g!, y), [ax], true)))];
  },
  // y = log softmax(x): dx = g - exp(y) * sum(g)
  LogSoftmax: ([g], { outputs: [y], attrs }) => {
    const ax = attrs.axis.v as number;
    return [sub(g!, mul(exp(y), reduceSum(g!, [ax], true)))];
  },
  // xhat = (x - mean) * inv; dxhat = g * scale;
  // dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
  LayerNormalization: (gy, { inputs: [x, scale, bias], outputs: [, mean, inv] }, needs) => {
    const g = gy[0];
    if (!g) return [null, null, null];
    const xhat = mul(sub(x!, mean), inv);
    let dx: Tensor | null = null;
    if (needs[0]) {
      const dxhat = mul(g, scale!);
      const centered = sub(dxhat, reduceMean(dxhat, [-1], true));
      dx = mul(inv, sub(centered, mul(xhat, reduceMean(mul(dxhat, xhat), [-1], true))));
    }
    return [dx, needs[1] ? sumTo(mul(g, xhat), scale!.shape) : null, needs[2] ? sumTo(g, bias!.shape) : null];
  },
});
