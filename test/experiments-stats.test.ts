/**
 * The report's statistics against hand-worked and published values (issue 24): t quantiles and
 * p-values (closed forms for df 1, 2 and 4; the published table), Welch's df by hand, the paired
 * test, Holm's step-down correction, the MDE, and the seeded bootstrap of a bounded rate.
 */
import t from 'tap';
import { bootstrapMean, nearestRank } from '../src/experiments/bootstrap.js';
import { holm, pairedTest, welchTest } from '../src/experiments/hypothesis.js';
import { tQuantile975 } from '../src/experiments/stats.js';
import { tCdf, tQuantile, tTwoSidedP } from '../src/experiments/tdist.js';

type Check = { ok(pass: boolean, message: string): void };
const near = (t: Check, got: number | undefined, want: number, tol: number, what: string) =>
  t.ok(got !== undefined && Math.abs(got - want) <= tol, `${what}: ${got} vs ${want}`);

t.test('t quantiles: the published table and the closed forms', async (t) => {
  // Published two-sided 5% critical values (e.g. any t table; scipy.stats.t.ppf(0.975, df)).
  for (const [df, want] of [
    [1, 12.706205],
    [2, 4.302653],
    [4, 2.776445],
    [9, 2.262157],
    [30, 2.042272],
  ])
    near(t, tQuantile(0.975, df), want, 5e-7, `t(0.975, ${df})`);
  // df = 1 is Cauchy: t_p = tan(pi (p - 1/2)); df = 2: t_p = (2p - 1) / sqrt(2 p (1 - p)).
  near(t, tQuantile(0.8, 1), Math.tan(Math.PI * 0.3), 1e-9, 't(0.8, 1) = tan(0.3 pi) = 1.376382');
  near(t, tQuantile(0.8, 2), 0.6 / Math.sqrt(0.32), 1e-9, 't(0.8, 2) = 0.6 / sqrt(0.32) = 1.060660');
  near(t, tQuantile(0.8, 9), 0.883404, 5e-7, 't(0.8, 9), table 0.883');
  near(t, tQuantile(0.025, 9), -2.262157, 5e-7, 'lower tail by symmetry');
  // The 97.5% table the summaries use agrees with the general quantile for every df it holds.
  for (let df = 1; df <= 30; df++) near(t, tQuantile975(df), tQuantile(0.975, df), 1e-6, `table df ${df}`);
  t.throws(() => tQuantile(1, 3), RangeError);
  t.throws(() => tQuantile(0.9, 0), RangeError);
});

t.test('t CDF and two-sided p: closed forms for df 1, 2, 4', async (t) => {
  near(t, tCdf(1, 1), 0.75, 1e-12, 'Cauchy: 1/2 + atan(1)/pi');
  near(t, tCdf(-1, 1), 0.25, 1e-12, 'Cauchy lower');
  // df 2: P(|T| < t) = sqrt(t^2 / (t^2 + 2)); t = 2 sqrt 3: sqrt(12/14) = 0.9258201 -> p 0.0741799
  near(t, tTwoSidedP(2 * Math.sqrt(3), 2), 1 - Math.sqrt(6 / 7), 1e-12, 'df 2, t = 2 sqrt 3');
  // df 4: P(|T| < t) = sqrt(x) (1 + (1 - x)/2), x = t^2 / (t^2 + 4); t = sqrt 6: x = 0.6 -> p 0.0704840
  near(t, tTwoSidedP(Math.sqrt(6), 4), 1 - Math.sqrt(0.6) * 1.2, 1e-12, 'df 4, t = sqrt 6');
  near(t, tTwoSidedP(0, 7), 1, 1e-12, 't = 0');
});

t.test("Welch's test by hand", async (t) => {
  // a = [1, 2, 3]: mean 2, s^2 1; b = [2, 4, 6, 8]: mean 5, s^2 20/3.
  // se^2 = 1/3 + (20/3)/4 = 1/3 + 5/3 = 2; t = (2 - 5) / sqrt 2 = -2.1213203
  // df = 2^2 / ((1/3)^2 / 2 + (5/3)^2 / 3) = 4 / (1/18 + 25/27) = 4 / (53/54) = 216/53 = 4.0754717
  const w = welchTest([1, 2, 3], [2, 4, 6, 8])!;
  near(t, w.estimate, -3, 1e-12, 'difference');
  near(t, w.se, Math.SQRT2, 1e-12, 'se');
  near(t, w.df, 216 / 53, 1e-12, 'Welch df');
  near(t, w.t, -3 / Math.SQRT2, 1e-12, 't');
  // p between the df-4 and df-5 values at |t| = 2.1213 (scipy: 0.0999129 at df 216/53)
  near(t, w.p, 0.0999128643, 1e-9, 'p');
  t.ok(w.p > tTwoSidedP(3 / Math.SQRT2, 5) && w.p < tTwoSidedP(3 / Math.SQRT2, 4), 'p between df 5 and df 4');
  // interval: -3 ± t(0.975, 216/53) sqrt 2; t(0.975, 216/53) = 2.7562849 (scipy)
  near(t, w.hi - w.lo, 2 * 2.7562848744 * Math.SQRT2, 1e-8, 'interval width');
  // MDE = (t(0.975, df) + t(0.8, df)) se = (2.7562849 + 0.9389475) sqrt 2 = 5.2257951
  near(t, w.mde, (2.7562848744 + 0.9389475122) * Math.SQRT2, 1e-8, 'MDE');
  t.equal(welchTest([1], [2, 3]), null, 'one value a side: no test');
  t.equal(welchTest([1, 1], [2, 2]), null, 'no spread: no test');
});

t.test('paired test by hand', async (t) => {
  // d = [1, 2, 3, 6]: mean 3, s^2 = (4 + 1 + 0 + 9) / 3 = 14/3, se = sqrt(14/12), t = 3 / se = 2.7774603, df 3
  const p = pairedTest([1, 2, 3, 6])!;
  near(t, p.se, Math.sqrt(14 / 12), 1e-12, 'se');
  t.equal(p.df, 3);
  near(t, p.t, 3 / Math.sqrt(14 / 12), 1e-12, 't');
  // MDE = (t(0.975, 3) + t(0.8, 3)) se = (3.182446 + 0.978472) * 1.0801234 = 4.4943
  near(t, p.mde, (3.1824463053 + 0.9784723124) * Math.sqrt(14 / 12), 1e-8, 'MDE');
  t.equal(pairedTest([2]), null);
});

t.test('Holm: a known-answer table', async (t) => {
  // p = [0.01, 0.04, 0.03, 0.005], m = 4. Ascending: 0.005, 0.01, 0.03, 0.04, times 4, 3, 2, 1:
  //   0.02, 0.03, 0.06, 0.04 -> running max: 0.02, 0.03, 0.06, 0.06. In input order:
  const got = holm([0.01, 0.04, 0.03, 0.005]);
  const want = [0.03, 0.06, 0.06, 0.02];
  for (const [i, g] of got.entries()) near(t, g ?? undefined, want[i], 1e-15, `p'[${i}]`);
  // capped at 1: 2 * 0.5 = 1, then max(1, 0.6) = 1
  t.same(holm([0.5, 0.6]), [1, 1]);
  // a missing test is no member of the family: m = 2
  const withNull = holm([null, 0.01, 0.02]);
  t.equal(withNull[0], null);
  near(t, withNull[1] ?? undefined, 0.02, 1e-15, 'm = 2: 2 * 0.01');
  near(t, withNull[2] ?? undefined, 0.02, 1e-15, 'max(0.02, 1 * 0.02)');
  t.same(holm([]), []);
});

t.test('bootstrap of a bounded rate: seeded, in [0, 1], the exact answer on a small case', async (t) => {
  // xs = [0, 0, 0, 1]: a resample's mean is k/4 with k ~ Binomial(4, 1/4):
  //   P(k <= 0) = 0.3164, P(k <= 2) = 0.9492, P(k <= 3) = 0.9961.
  // The 2.5% point is 0 and the 97.5% point k = 3 (0.9492 < 0.975 <= 0.9961): [0, 0.75],
  // where the t-interval would be 0.25 ± 3.182446 * 0.5 / 2 = [-0.546, 1.046].
  const b = bootstrapMean([0, 0, 0, 1])!;
  t.same([b.lo, b.hi, b.resamples], [0, 0.75, 10000]);
  t.same(bootstrapMean([0, 0, 0, 1]), b, 'the same seed repeats');
  // xs = [0, 1]: means 0, 1/2, 1 with P 1/4, 1/2, 1/4 -> [0, 1]
  t.same(bootstrapMean([0, 1]), { lo: 0, hi: 1, resamples: 10000 });
  t.same(bootstrapMean([0.3, 0.3, 0.3]), { lo: 0.3, hi: 0.3, resamples: 10000 });
  t.equal(bootstrapMean([0.5]), null);
  // nearest rank: 10 sorted values, p 0.025 -> the 1st, 0.975 -> the 10th, 0.5 -> the 5th
  const ten = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
  t.same([nearestRank(ten, 0.025), nearestRank(ten, 0.975), nearestRank(ten, 0.5)], [1, 10, 5]);
});
