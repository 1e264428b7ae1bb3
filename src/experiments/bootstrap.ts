/**
 * A seeded percentile bootstrap of the mean, for rates bounded in [0, 1] (EM, the known-search and
 * unknown-no-search rates): resample the seeds' values with replacement B times, take each
 * resample's mean, report the 2.5% and 97.5% order statistics. The interval stays inside [0, 1]
 * and follows a bimodal spread (0.5 ± 0.5 by t becomes [0, 1], not [-0.74, 1.74]). The draws come
 * from util/rng.ts seeded with `seed`, so a report repeats to the bit.
 */
import { Rng } from '../util/rng.js';

export const BOOTSTRAP_RESAMPLES = 10000;
export const BOOTSTRAP_SEED = 24;

export interface BootstrapInterval {
  lo: number;
  hi: number;
  resamples: number;
}

/** The p-quantile of sorted values by the nearest-rank rule (ceil(p·B)-th, 1-based). */
export function nearestRank(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

/** The 95% percentile-bootstrap interval of the mean of xs (null with fewer than 2 values). */
export function bootstrapMean(
  xs: readonly number[],
  opts: { resamples?: number; seed?: number } = {},
): BootstrapInterval | null {
  if (xs.length < 2) return null;
  const B = opts.resamples ?? BOOTSTRAP_RESAMPLES;
  const rng = new Rng(opts.seed ?? BOOTSTRAP_SEED);
  const means = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    let s = 0;
    for (let i = 0; i < xs.length; i++) s += xs[rng.int(xs.length)];
    means[b] = s / xs.length;
  }
  means.sort();
  const sorted = Array.from(means);
  return { lo: nearestRank(sorted, 0.025), hi: nearestRank(sorted, 0.975), resamples: B };
}
