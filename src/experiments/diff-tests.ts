/**
 * p-values for the paired-difference tables: each cell's paired t-test against the baseline per
 * metric and split, and Holm over every one of them in the report (the family is the whole set of
 * differences a reader scans, so "one of 28 EM tests at p 0.02" is read against the other 27).
 */
import { holm, pairedTest } from './hypothesis.js';
import { METRICS, type MetricKey } from './metrics.js';

/** What the tests read and write of a report's cell (report.ts's CellSplit has it). */
interface DiffCell {
  label: string;
  bySeed: Record<MetricKey, Map<number, number | null>>;
  diff?: unknown;
  diffP?: Partial<Record<MetricKey, DiffP>>;
}

export interface DiffP {
  /** The paired t-test's two-sided p (null with fewer than 2 pairs or no spread). */
  p: number | null;
  /** Holm-adjusted over every paired difference of the report. */
  pHolm: number | null;
}

function diffsOf(a: Map<number, number | null>, b: Map<number, number | null>): number[] {
  return [...a].flatMap(([seed, x]) => {
    const y = b.get(seed);
    return x !== null && y !== null && y !== undefined ? [x - y] : [];
  });
}

/** Sets each non-baseline cell's `diffP` (splits as buildReport made them). */
export function testDifferences(
  splits: ReadonlyArray<{ cells: readonly DiffCell[] }>,
  baseline: string | null,
): void {
  const slots: Array<{ cell: DiffCell; key: MetricKey; p: number | null }> = [];
  for (const s of splits) {
    const base = s.cells.find((c) => c.label === baseline);
    if (!base) continue;
    for (const cell of s.cells)
      if (cell.diff)
        for (const { key } of METRICS)
          slots.push({ cell, key, p: pairedTest(diffsOf(cell.bySeed[key], base.bySeed[key]))?.p ?? null });
  }
  const adjusted = holm(slots.map((x) => x.p));
  slots.forEach(({ cell, key, p }, i) => {
    cell.diffP ??= {};
    cell.diffP[key] = { p, pHolm: adjusted[i] };
  });
}
