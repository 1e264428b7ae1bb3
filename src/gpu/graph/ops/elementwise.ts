/**
 * Elementwise ops with numpy broadcasting: Add, Sub, Mul, Div, Pow, Min, Max, Neg, Exp, Log,
 * Sqrt, Tanh, Sigmoid, Erf, Sin, Cos, Abs, Clip, Where, Cast, plus the comparisons and boolean ops
 * (no gradient: their outputs are bool). Binary helpers accept a number for either side, made a
 * scalar constant of the other side's dtype. Gradients of broadcast inputs are summed back to
 * the input's shape (`sumTo`).
 */
import { registerGradRules } from '../autodiff.js';
import { broadcastShapes, type DType, FLOAT_DTYPES, GraphBuildError, type Tensor } from '../graph.js';
import { ONNX_DTYPE } from '../onnx-proto.js';
import { sumTo } from './broadcast.js';

export type TensorLike = Tensor | number;

function lift(x: TensorLike, other: TensorLike): Tensor {
  if (typeof x !== 'number') return x;
  if (typeof other === 'number') throw new GraphBuildError('lift', 'at least one operand must be a tensor');
  return other.graph.scalar(x, other.dtype);
}

function binary(op: string, a: TensorLike, b: TensorLike, outDtype?: DType): Tensor {
  const x = lift(a, b);
  const y = lift(b, a);
  if (x.dtype !== y.dtype) throw new GraphBuildError(op, `dtype mismatch ${x} vs ${y}`);
  return x.graph.addNode(op, [x, y], {}, [
    { dtype: outDtype ?? x.dtype, shape: broadcastShapes(op, x.shape, y.shape) },
  ])[0];
}

function unary(op: string, x: Tensor): Tensor {
  return x.graph.addNode(op, [x], {}, [{ dtype: x.dtype, shape: x.shape }])[0];
}

export const add = (a: TensorLike, b: TensorLike) => binary('Add', a, b);
export const sub = (a: TensorLike, b: TensorLike) => binary('Sub', a, b);
export const mul = (a: TensorLike, b: TensorLike) => binary('Mul', a, b);
export const div = (a: TensorLike, b: TensorLike) => binary('Div', a, b);
export const pow = (a: TensorLike, b: TensorLike) => binary('Pow', a, b);
/** Elementwise minimum of two tensors (ONNX Min, two inputs). */
export const min = (a: TensorLike, b: TensorLike) => binary('Min', a, b);
export const max = (a: TensorLike, b: TensorLike) => binary('Max', a, b);
export const neg = (x: Tensor) => unary('Neg', x);
export const exp = (x: Tensor) => unary('Exp', x);
export const log = (x: Tensor) => unary('Log', x);
export const sqrt = (x: Tensor) => unary('Sqrt', x);
export const tanh = (x: Tensor) => unary('Tanh', x);
export const sigmoid = (x: Tensor) => unary('Sigmoid', x);
/** Erf has no float64 kernel in ORT's CPU provider: float64 graphs use tanh forms instead. */
export const erf = (x: Tensor) => unary('Erf', x);
export const abs = (x: Tensor) => unary('Abs', x);
/** Sin and Cos: rotary position embeddings. */
export const sin = (x: Tensor) => unary('Sin', x);
export const cos = (x: Tensor) => unary('Cos', x);

export const less = (a: TensorLike, b: TensorLike) => binary('Less', a, b, 'bool');
export const lessOrEqual = (a: TensorLike, b: TensorLike) => binary('LessOrEqual', a, b, 'bool');
export const greater = (a: TensorLike, b: TensorLike) => binary('Greater', a, b, 'bool');
export const greaterOrEqual = (a: TensorLike, b: TensorLike) => binary('GreaterOrEqual', a, b, 'bool');
export const equal = (a: TensorLike, b: TensorLike) => binary('Equal', a, b, 'bool');
export const and = (a: Tensor, b: Tensor) => binary('And', a, b);
export const or = (a: Tensor, b: Tensor) => binary('Or', a, b);
export const not = (x: Tensor) => unary('Not', x);

/** Clamps x to [lo, hi] (scalars: numbers or rank-0 tensors such as hyperparameter inputs). */
export function clip(x: Tensor, lo: TensorLike, hi: TensorLike): Tensor {
  return x.graph.addNode('Clip', [x, lift(lo, x), lift(hi, x)], {}, [{ dtype: x.dtype, shape: x.shape }])[0];
}

/** cond ? a : b, broadcasting all three. */
export function where(cond: Tensor, a: TensorLike, b: TensorLike): Tensor {
  const x = lift(a, b);
  const y = lift(b, a);
  const shape = broadcastShapes('Where', cond.shape, broadcastShapes('Where', x.shape, y.shape));
  return cond.graph.addNode('Where', [cond, x, y], {}, [{ dtype: x.dtype, shape }])[0];
}

export function cast(x: Tensor, dtype: DType): Tensor {
  if (x.dtype === dtype) return x;
  return x.graph.addNode('Cast', [x], { to: { kind: 'int', v: ONNX_DTYPE[dtype] } }, [
    { dtype, shape: x.shape },
  ])[0];
}

/** x^2 as a Mul (cheaper and exact, unlike Pow). */
export const square = (x: Tensor) => mul(x, x);

// ---- gradients ----

const noGrad = (_gy: Array<Tensor | null>, n: { inputs: unknown[] }) => n.inputs.map(() => null);

registerGradRules({
  Add: ([g], { inputs: [a, b] }, needs) => [
    needs[0] ? sumTo(g!, a!.shape) : null,
    needs[1] ? sumTo(g!, b!.shape) : null,
  ],
  Sub: ([g], { inputs: [a, b] }, needs) => [
    needs[0] ? sumTo(g!, a!.shape) : null,
    needs[1] ? sumTo(neg(g!), b!.shape) : null,
  ],
  Mul: ([g], { inputs: [a, b] }, needs) => [
    needs[0] ? sumTo(mul(g!, b!), a!.shape) : null,
    needs[1] ? sumTo(mul(g!, a!), b!.shape) : null,
  ],
  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b = -y/b
  Div: ([g], { inputs: [a, b], outputs: [y] }, needs) => [
    needs[0] ? sumTo(div(g!, b!), a!.shape) : null,
    needs[1] ? sumTo(neg(div(mul(g!, y), b!)), b!.shape) : null,
  ],
  // d(a^b)/da = b a^(b-1); d(a^b)/db = y ln a (defined for a > 0)
  Pow: ([g], { inputs: [a, b], outputs: [y] }, needs) => [
    needs[0] ? sumTo(mul(g!, mul(b!, pow(a!, sub(b!, 1)))), a!.shape) : null,
    needs[1] ? sumTo(mul(g!, mul(y, log(a!))), b!.shape) : null,
  ],
  // Ties send the whole gradient to the first input (a subgradient; PPO's min ties are harmless).
  Min: ([g], { inputs: [a, b] }, needs) => {
    const first = lessOrEqual(a!, b!);
    return [
      needs[0] ? sumTo(where(first, g!, 0), a!.shape) : null,
      needs[1] ? sumTo(where(first, 0, g!), b!.shape) : null,
    ];
  },
  Max: ([g], { inputs: [a, b] }, needs) => {
    const first = greaterOrEqual(a!, b!);
    return [
      needs[0] ? sumTo(where(first, g!, 0), a!.shape) : null,
      needs[1] ? sumTo(where(first, 0, g!), b!.shape) : null,
    ];
  },
  Neg: ([g]) => [neg(g!)],
  Exp: ([g], { outputs: [y] }) => [mul(g!, y)],
  Log: ([g], { inputs: [x] }) => [div(g!, x!)],
  Sqrt: ([g], { outputs: [y] }) => [div(g!, mul(y, 2))],
  Tanh: ([g], { outputs: [y] }) => [mul(g!, sub(1, square(y)))],
  Sigmoid: ([g], { outputs: [y] }) => [mul(g!, mul(y, sub(1, y)))],
  Erf: ([g], { inputs: [x] }) => [mul(g!, mul(exp(neg(square(x!))), 2 / Math.sqrt(Math.PI)))],
  Sin: ([g], { inputs: [x] }) => [mul(g!, cos(x!))],
  Cos: ([g], { inputs: [x] }) => [neg(mul(g!, sin(x!)))],
  // |x|' = sign(x), 0 at 0
  Abs: ([g], { inputs: [x] }) => [
    mul(g!, x!.graph.addNode('Sign', [x!], {}, [{ dtype: x!.dtype, shape: x!.shape }])[0]),
  ],
  // Inside [lo, hi] (bounds included, as torch.clamp) the gradient passes; outside it goes to the bound.
  Clip: ([g], { inputs: [x, lo, hi] }, needs) => {
    const below = less(x!, lo!);
    const above = greater(x!, hi!);
    return [
      needs[0] ? where(or(below, above), 0, g!) : null,
      needs[1] ? sumTo(where(below, g!, 0), lo!.shape) : null,
      needs[2] ? sumTo(where(above, g!, 0), hi!.shape) : null,
    ];
  },
  Where: ([g], { inputs: [c, a, b] }, needs) => [
    null,
    needs[1] ? sumTo(where(c!, g!, 0), a!.shape) : null,
    needs[2] ? sumTo(where(c!, 0, g!), b!.shape) : null,
  ],
  Cast: ([g], { inputs: [x] }) => [FLOAT_DTYPES.has(x!.dtype) ? cast(g!, x!.dtype) : null],
  Less: noGrad,
  LessOrEqual: noGrad,
  Greater: noGrad,
  GreaterOrEqual: noGrad,
  Equal: noGrad,
  Sign: ([g]) => [mul(g!, 0)],
});
