/**
 * AdamW on the host, in place: the train graph (src/gpu/train-step.ts, optimizer 'host') outputs
 * the unclipped gradients and the step's scalar coefficients; this writes the update into the
 * trainer's existing parameter and moment arrays, so a step holds no second copy of either.
 *
 * Bit-equal to the graph optimizer: the same formula in the same float32 operation order,
 *   m1    = m b1 + g s1                      s1 = (1 - b1) coef
 *   v1    = v b2 + (g g) s2                  s2 = (1 - b2) coef^2
 *   denom = sqrt(v1) invSqrtBc2 + eps        invSqrtBc2 = 1 / sqrt(1 - b2^step)
 *   p     = (p keep | p) - (m1 / denom) stepSize   keep = 1 - lr wd, stepSize = lr / (1 - b1^step)
 * each operation rounded to float32 (Math.fround; a double result of +, -, *, / or sqrt on float32
 * operands rounds to the correctly rounded float32 result). The scalars come from the graph
 * itself: ORT's float32 Pow is not correctly rounded (about 1% of (0.9 | 0.999)^step for step
 * <= 20000 differ from fround(Math.pow) in the last bit), so recomputing them here would drift.
 */

/** The per-step scalars of the update, as the graph computed them (float32 values). */
export interface AdamwScalars {
  beta1: number;
  beta2: number;
  eps: number;
  /** (1 - beta1) coef, coef the global-norm clip factor. */
  s1: number;
  /** (1 - beta2) coef^2. */
  s2: number;
  /** lr / (1 - beta1^step). */
  stepSize: number;
  /** 1 / sqrt(1 - beta2^step). */
  invSqrtBc2: number;
  /** 1 - lr weightDecay (decoupled decay). */
  keep: number;
}

/** The graph outputs the host update reads, in AdamwScalars' order after beta1, beta2, eps. */
export const ADAMW_SCALAR_OUTPUTS = {
  s1: 'adamw.s1',
  s2: 'adamw.s2',
  stepSize: 'adamw.step_size',
  invSqrtBc2: 'adamw.inv_sqrt_bc2',
  keep: 'adamw.keep',
} as const;

type FloatArray = Float32Array | Float64Array;

/**
 * One AdamW update of one tensor, in place: `p`, `m` and `v` are overwritten; `g` is read.
 * `decay`: the tensor gets weight decay (matrices and embeddings). Float64Array operands compute
 * in float64 (the finite-difference tests' trainers), Float32Array ones round every step to float32.
 */
export function adamwInPlace(
  p: FloatArray,
  m: FloatArray,
  v: FloatArray,
  g: FloatArray,
  s: AdamwScalars,
  decay: boolean,
): void {
  const n = p.length;
  if (m.length !== n || v.length !== n || g.length !== n)
    throw new Error(`adamw: lengths differ (p ${n}, m ${m.length}, v ${v.length}, g ${g.length})`);
  if (p instanceof Float64Array) {
    updateF64(p, m, v, g, s, decay);
    return;
  }
  const f = Math.fround;
  const [b1, b2, eps, s1, s2] = [f(s.beta1), f(s.beta2), f(s.eps), f(s.s1), f(s.s2)];
  const [stepSize, inv, keep] = [f(s.stepSize), f(s.invSqrtBc2), f(s.keep)];
  for (let i = 0; i < n; i++) {
    const gi = g[i];
    const m1 = f(f(m[i] * b1) + f(gi * s1));
    const v1 = f(f(v[i] * b2) + f(f(gi * gi) * s2));
    const denom = f(f(f(Math.sqrt(v1)) * inv) + eps);
    const pd = decay ? f(p[i] * keep) : p[i];
    p[i] = pd - f(f(m1 / denom) * stepSize); // the store rounds the last subtraction
    m[i] = m1;
    v[i] = v1;
  }
}

function updateF64(
  p: FloatArray,
  m: FloatArray,
  v: FloatArray,
  g: FloatArray,
  s: AdamwScalars,
  decay: boolean,
) {
  for (let i = 0; i < p.length; i++) {
    const gi = g[i];
    const m1 = m[i] * s.beta1 + gi * s.s1;
    const v1 = v[i] * s.beta2 + gi * gi * s.s2;
    const denom = Math.sqrt(v1) * s.invSqrtBc2 + s.eps;
    p[i] = (decay ? p[i] * s.keep : p[i]) - (m1 / denom) * s.stepSize;
    m[i] = m1;
    v[i] = v1;
  }
}
