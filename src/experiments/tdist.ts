/**
 * Student's t-distribution for any real df > 0 (Welch's df is not an integer): the CDF from the
 * regularised incomplete beta function, I_x(df/2, 1/2) with x = df / (df + t²) (Abramowitz &
 * Stegun 26.7.1), evaluated by Lentz's continued fraction (Numerical Recipes §6.4), and the
 * quantile by bisection on that CDF. Pure arithmetic, no dependency; checked against the published
 * table and the closed forms for df = 1 (Cauchy) and df = 2 in test/experiments-stats.test.ts.
 */

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: about 1e-15 relative). */
export function lnGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
  const z = x - 1;
  let a = c[0];
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += c[i] / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Continued fraction of the incomplete beta (modified Lentz). */
function betaCf(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  d = 1 / (Math.abs(d) < tiny ? tiny : d);
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    for (const aa of [
      (m * (b - m) * x) / ((a + m2 - 1) * (a + m2)),
      (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1)),
    ]) {
      d = 1 + aa * d;
      d = 1 / (Math.abs(d) < tiny ? tiny : d);
      c = 1 + aa / c;
      if (Math.abs(c) < tiny) c = tiny;
      h *= d * c;
    }
    if (Math.abs(d * c - 1) < 1e-15) break;
  }
  return h;
}

/** The regularised incomplete beta I_x(a, b), 0 <= x <= 1. */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const lnFront = lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a * Math.log(x) + b * Math.log(1 - x);
  // The fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry beyond it.
  if (x < (a + 1) / (a + b + 2)) return (Math.exp(lnFront) * betaCf(a, b, x)) / a;
  return 1 - (Math.exp(lnFront) * betaCf(b, a, 1 - x)) / b;
}

function checkDf(df: number): void {
  if (!(df > 0) || !Number.isFinite(df)) throw new RangeError(`degrees of freedom must be > 0, got ${df}`);
}

/** P(T <= t) for T ~ t(df). */
export function tCdf(t: number, df: number): number {
  checkDf(df);
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5); // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

/** Two-sided p-value of a t statistic: P(|T| >= |t|). */
export function tTwoSidedP(t: number, df: number): number {
  checkDf(df);
  return incompleteBeta(df / (df + t * t), df / 2, 0.5);
}

/** The p-quantile of t(df), 0 < p < 1: bisection on the CDF to 1e-12 in t. */
export function tQuantile(p: number, df: number): number {
  checkDf(df);
  if (!(p > 0 && p < 1)) throw new RangeError(`probability must be in (0, 1), got ${p}`);
  if (p === 0.5) return 0;
  if (p < 0.5) return -tQuantile(1 - p, df);
  let hi = 1;
  while (tCdf(hi, df) < p) hi *= 2;
  let lo = 0;
  for (let i = 0; i < 200 && hi - lo > 1e-12 * Math.max(1, hi); i++) {
    const mid = (lo + hi) / 2;
    if (tCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}
