/**
 * Two-sample tests over seeds and the corrections a report applies to them.
 *
 *   Welch (unpaired):  d = mean(a) - mean(b), se = sqrt(s_a²/n_a + s_b²/n_b),
 *                      df = se⁴ / ((s_a²/n_a)² / (n_a - 1) + (s_b²/n_b)² / (n_b - 1))   (Welch-Satterthwaite)
 *   paired:            d = mean(a_s - b_s) over seeds s in both, se = sd(d_s) / sqrt(n), df = n - 1
 *   t = d / se, p = P(|T_df| >= |t|) (two-sided), 95% interval d ± t(0.975, df) · se.
 *   MDE (80% power, two-sided α 0.05): (t(0.975, df) + t(0.80, df)) · se, the usual normal-theory
 *   approximation with t quantiles (the smallest true difference the test would detect 4 times
 *   in 5 at this spread and these seeds; it ignores the noncentral t's extra skew, a few % at df 2).
 *   Holm (1979): sort the m p-values ascending, p'_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
 * Sample SDs use ddof 1. A test needs at least 2 values per side (paired: 2 pairs) and se > 0.
 */
import { tQuantile, tTwoSidedP } from './tdist.js';

export interface TestResult {
  test: 'welch' | 'paired';
  /** Values (welch: n_a + n_b; paired: pairs). */
  n: number;
  estimate: number;
  se: number;
  df: number;
  t: number;
  p: number;
  lo: number;
  hi: number;
  /** Minimum detectable |difference| at 80% power, two-sided α 0.05. */
  mde: number;
}

const meanOf = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const varOf = (xs: readonly number[]) => {
  const m = meanOf(xs);
  return xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1);
};

function result(
  test: TestResult['test'],
  n: number,
  estimate: number,
  se: number,
  df: number,
): TestResult | null {
  if (!(se > 0) || !(df > 0)) return null;
  const t = estimate / se;
  const q = tQuantile(0.975, df);
  return {
    test,
    n,
    estimate,
    se,
    df,
    t,
    p: tTwoSidedP(t, df),
    lo: estimate - q * se,
    hi: estimate + q * se,
    mde: (q + tQuantile(0.8, df)) * se,
  };
}

/** Welch's unpaired t-test of mean(a) - mean(b); null with fewer than 2 values a side or no spread. */
export function welchTest(a: readonly number[], b: readonly number[]): TestResult | null {
  if (a.length < 2 || b.length < 2) return null;
  const va = varOf(a) / a.length;
  const vb = varOf(b) / b.length;
  const se = Math.sqrt(va + vb);
  const df = (va + vb) ** 2 / (va ** 2 / (a.length - 1) + vb ** 2 / (b.length - 1));
  return result('welch', a.length + b.length, meanOf(a) - meanOf(b), se, df);
}

/** The paired t-test of the differences a_s - b_s; null with fewer than 2 pairs or no spread. */
export function pairedTest(diffs: readonly number[]): TestResult | null {
  if (diffs.length < 2) return null;
  const se = Math.sqrt(varOf(diffs) / diffs.length);
  return result('paired', diffs.length, meanOf(diffs), se, diffs.length - 1);
}

/** Holm's step-down adjusted p-values, in the input's order (nulls stay null and do not count in m). */
export function holm(ps: ReadonlyArray<number | null>): Array<number | null> {
  const idx = ps
    .flatMap((p, i) => (p === null ? [] : [i]))
    .sort((i, j) => (ps[i] as number) - (ps[j] as number));
  const m = idx.length;
  const out: Array<number | null> = ps.map(() => null);
  let running = 0;
  idx.forEach((i, rank) => {
    running = Math.max(running, Math.min(1, (m - rank) * (ps[i] as number)));
    out[i] = running;
  });
  return out;
}
