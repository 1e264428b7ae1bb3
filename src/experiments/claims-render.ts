/**
 * The report's Claims table (claims.ts results): the declared test, its estimate, interval, p and
 * Holm-adjusted p, the MDE at 80% power, the other test beside it, and the verdict.
 */
import type { ClaimResult } from './claims.js';
import type { TestResult } from './hypothesis.js';
import { METRICS } from './metrics.js';

const f3 = (x: number) => x.toFixed(3);
const signed = (x: number) => (x >= 0 ? `+${f3(x)}` : f3(x));
/** p-values: 3 significant digits, small ones in exponent form. */
export const pText = (p: number | null) =>
  p === null ? '-' : p < 0.001 ? p.toExponential(1) : p.toPrecision(3);

function testText(r: TestResult | null): string {
  if (!r) return '-';
  return `${r.test}: ${signed(r.estimate)} [${f3(r.lo)}, ${f3(r.hi)}], t(${r.df.toFixed(1)}) = ${r.t.toFixed(2)}, p = ${pText(r.p)}`;
}

export function verdictText(r: ClaimResult): string {
  if (r.verdict === 'not detected' && r.primary) return `not detected (MDE ${f3(r.primary.mde)})`;
  return r.verdict;
}

export function claimsTable(results: readonly ClaimResult[]) {
  const title = (k: string) => METRICS.find((m) => m.key === k)?.title ?? k;
  return {
    title: 'Claims (two-sided tests over seeds; Holm over this list; α = 0.05)',
    columns: [
      'claim',
      'metric',
      'split',
      'a − b',
      'claimed',
      'test',
      'p (Holm)',
      'MDE (80%)',
      'other test',
      'verdict',
    ],
    rows: results.map((r) => [
      r.claim.claim,
      title(r.claim.metric),
      r.claim.split,
      `${r.claim.cells[0]} − ${r.claim.cells[1]}`,
      r.claim.direction === 'greater' ? '> 0' : '< 0',
      testText(r.primary),
      pText(r.pHolm),
      r.primary ? f3(r.primary.mde) : '-',
      testText(r.other),
      verdictText(r),
    ]),
  };
}
