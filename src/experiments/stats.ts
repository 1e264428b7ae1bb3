/**
 * Summary statistics over seeds: the mean and a two-sided 95% confidence interval from Student's
 * t-distribution with n - 1 degrees of freedom (mean ± t(0.975, n-1) · s / √n, s the sample
 * standard deviation with ddof = 1). Seeds are few (3-5), so the normal 1.96 would be far too
 * narrow: t(0.975, 2) = 4.30.
 */

/** t(0.975, df) for df = 1..30 (scipy.stats.t.ppf(0.975, df), 6 decimals). */
const T975 = [
  12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
  2.200985, 2.178813, 2.160369, 2.144787, 2.13145, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963, 2.079614,
  2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.04523, 2.042272,
];

/** The 97.5% quantile of Student's t with `df` degrees of freedom (df >= 1). */
export function tQuantile975(df: number): number {
  if (!Number.isInteger(df) || df < 1)
    throw new RangeError(`degrees of freedom must be an integer >= 1, got ${df}`);
  if (df <= T975.length) return T975[df - 1];
  // Cornish-Fisher expansion around the normal quantile (three terms): under 2e-6 off for df > 30.
  const z = 1.959963984540054;
  return (
    z +
    (z ** 3 + z) / (4 * df) +
    (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2) +
    (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3)
  );
}

export interface Summary {
  n: number;
  mean: number | null;
  /** Half-width of the 95% interval; null with fewer than 2 values. */
  half: number | null;
  sd: number | null;
}

/** Mean and 95% t-interval of the finite values (nulls are seeds without a value). */
export function summarize(values: ReadonlyArray<number | null>): Summary {
  const xs = values.filter((v): v is number => v !== null && Number.isFinite(v));
  const n = xs.length;
  if (n === 0) return { n, mean: null, half: null, sd: null };
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  if (n === 1) return { n, mean, half: null, sd: null };
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1));
  return { n, mean, half: (tQuantile975(n - 1) * sd) / Math.sqrt(n), sd };
}

/**
 * Paired differences a - b by seed (seeds present in both with values), then their summary.
 * Pairing removes what the seed shares between the two runs (the question draws).
 */
export function pairedDifference(
  a: ReadonlyMap<number, number | null>,
  b: ReadonlyMap<number, number | null>,
): Summary {
  const diffs: number[] = [];
  for (const [seed, x] of a) {
    const y = b.get(seed);
    if (x !== null && y !== null && y !== undefined) diffs.push(x - y);
  }
  return summarize(diffs);
}
