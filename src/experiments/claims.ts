/**
 * The spec's `claims:` list and its verdicts: each claim says one cell's metric on one split is
 * greater (or less) than another's,
 *
 *   claims:
 *     - claim: AKBE lowers test TC        # the sentence the verdict is about
 *       metric: tc                        # em | tc | tp | knownSearchRate | unknownNoSearchRate
 *       split: test                       # train or an evaluated split
 *       direction: less                   # cells[0] - cells[1] is < 0 (less) or > 0 (greater)
 *       cells: [akbe, grpo]
 *       test: paired                      # optional: welch (default) or paired (seeds as pairs)
 *
 * and the report tests it over seeds (hypothesis.ts): the declared test decides, the other is
 * shown beside it when both sides share seeds. The family is every claim of the report: Holm
 * adjusts their p-values together. Verdict, at α = 0.05 on the Holm-adjusted p: `holds` (the
 * difference has the claimed sign), `contradicted` (the opposite sign), else `not detected`, with
 * the test's MDE at 80% power, the smallest difference these seeds could have shown.
 */
import { holm, pairedTest, type TestResult, welchTest } from './hypothesis.js';
import { METRICS, type MetricKey } from './metrics.js';

export interface Claim {
  claim: string;
  metric: MetricKey;
  split: string;
  direction: 'greater' | 'less';
  cells: [string, string];
  test: 'welch' | 'paired';
}

export const ALPHA = 0.05;

export interface ClaimResult {
  claim: Claim;
  /** The declared test (null: too few values, or no spread). */
  primary: TestResult | null;
  /** The other test, when it can be computed. */
  other: TestResult | null;
  pHolm: number | null;
  verdict: 'holds' | 'contradicted' | 'not detected' | 'no data';
}

const isMap = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);
const CLAIM_KEYS = ['claim', 'metric', 'split', 'direction', 'cells', 'test'];

/** Checks a spec's `claims` value against its cell labels; `fail(key, message)` throws. */
export function parseClaims(
  raw: unknown,
  labels: ReadonlySet<string>,
  fail: (key: string, msg: string) => never,
): Claim[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) fail('claims', 'must be a list of {claim, metric, split, direction, cells}');
  return (raw as unknown[]).map((c, i): Claim => {
    const at = `claims[${i}]`;
    if (!isMap(c)) fail(at, 'must be a mapping with claim, metric, split, direction, cells');
    for (const k of Object.keys(c))
      if (!CLAIM_KEYS.includes(k)) fail(`${at}.${k}`, `unknown key; a claim has ${CLAIM_KEYS.join(', ')}`);
    const str = (k: string) => {
      if (typeof c[k] !== 'string' || c[k] === '')
        fail(`${at}.${k}`, `must be a non-empty string, got ${JSON.stringify(c[k])}`);
      return c[k] as string;
    };
    const metric = str('metric');
    const metrics = METRICS.map((m) => m.key as string);
    if (!metrics.includes(metric))
      fail(`${at}.metric`, `must be one of ${metrics.join(', ')}, got ${metric}`);
    const direction = str('direction');
    if (direction !== 'greater' && direction !== 'less')
      fail(`${at}.direction`, `must be greater or less, got ${direction}`);
    const cells = c.cells;
    if (!Array.isArray(cells) || cells.length !== 2 || cells[0] === cells[1])
      fail(`${at}.cells`, 'must be two different cell labels [a, b] (the claim is about a - b)');
    for (const l of cells as unknown[])
      if (typeof l !== 'string' || !labels.has(l))
        fail(`${at}.cells`, `names no cell: ${JSON.stringify(l)}; the cells are ${[...labels].join(', ')}`);
    const test = c.test === undefined ? 'welch' : c.test;
    if (test !== 'welch' && test !== 'paired')
      fail(`${at}.test`, `must be welch or paired, got ${JSON.stringify(test)}`);
    return {
      claim: str('claim'),
      metric: metric as MetricKey,
      split: str('split'),
      direction,
      cells: cells as [string, string],
      test,
    };
  });
}

/** What the claims read of a report (ExperimentReport has it): each split's cells' per-seed values. */
export interface ClaimFigures {
  splits: ReadonlyArray<{
    split: string;
    cells: ReadonlyArray<{ label: string; bySeed: Record<MetricKey, Map<number, number | null>> }>;
  }>;
}

/** Each claim's tests, Holm-adjusted p over the family, and verdict. */
export function evaluateClaims(claims: readonly Claim[], report: ClaimFigures): ClaimResult[] {
  const tested = claims.map((claim) => {
    const split = report.splits.find((s) => s.split === claim.split);
    const [a, b] = claim.cells.map((l) => split?.cells.find((c) => c.label === l)?.bySeed[claim.metric]);
    if (!a || !b) return { claim, primary: null, other: null };
    const values = (m: Map<number, number | null>) => [...m.values()].filter((v): v is number => v !== null);
    const diffs = [...a].flatMap(([seed, x]) => {
      const y = b.get(seed);
      return x !== null && y !== null && y !== undefined ? [x - y] : [];
    });
    const welch = welchTest(values(a), values(b));
    const paired = pairedTest(diffs);
    return claim.test === 'paired'
      ? { claim, primary: paired, other: welch }
      : { claim, primary: welch, other: paired };
  });
  const adjusted = holm(tested.map((r) => r.primary?.p ?? null));
  return tested.map((r, i) => {
    const pHolm = adjusted[i];
    const p = r.primary;
    let verdict: ClaimResult['verdict'] = 'no data';
    if (p && pHolm !== null) {
      const sign = r.claim.direction === 'greater' ? 1 : -1;
      verdict = pHolm >= ALPHA ? 'not detected' : Math.sign(p.estimate) === sign ? 'holds' : 'contradicted';
    }
    return { ...r, pHolm, verdict };
  });
}
