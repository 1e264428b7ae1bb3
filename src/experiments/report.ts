/**
 * An experiment's report from its runs' figures (src/events/projections/run-figures.ts): pure,
 * so the numbers can be checked against hand-worked ones without NATS.
 *
 * Splits:
 *   - `train`: each run's mean over its last TRAIN_WINDOW learner steps (the training rollouts
 *     of those steps, sampled at the training temperature);
 *   - every evaluated split (dev, test): the run's final evaluation (eval.completed, when: after,
 *     the highest version).
 * Per split and cell: mean ± the 95% t-interval half-width over the cell's seeds (stats.ts), and
 * paired differences against the baseline cell (per seed, then mean ± t-interval, the paired
 * test's p and its Holm-adjusted p over every difference of the report).
 * Rates bounded in [0, 1] (EM, known-search, unknown-no-search) also get a seeded percentile
 * bootstrap interval (bootstrap.ts), which stays in [0, 1]. The spec's claims are tested
 * (claims.ts: Welch / paired t, Holm over the claims, MDE at 80% power).
 * Per step: the mean over seeds, the min..max over seeds as the band, and each seed's value.
 */
import type { RunFigures, StepFigures } from '../events/projections/run-figures.js';
import { type BootstrapInterval, bootstrapMean } from './bootstrap.js';
import { type ClaimResult, evaluateClaims } from './claims.js';
import { type DiffP, testDifferences } from './diff-tests.js';
import { METRICS, type MetricKey } from './metrics.js';
import type { Cell, ExperimentSpec, PlannedRun } from './spec.js';
import { pairedDifference, type Summary, summarize } from './stats.js';

export const TRAIN_WINDOW = 5;

type Figures = Record<MetricKey, number | null>;

export const STEP_PLOTS = [
  { key: 'tc', title: 'TC (tool calls per question)' },
  { key: 'em', title: 'EM' },
  { key: 'meanResponseLength', title: 'response length (tokens)' },
  { key: 'tool-dependent', title: 'tool-dependent questions' },
  { key: 'efficiency', title: 'efficiency questions' },
  { key: 'hallucination', title: 'hallucination questions' },
  { key: 'both-wrong', title: 'both-wrong questions' },
  { key: 'knownSearchRate', title: 'known-search rate' },
] as const;
type StepKey = (typeof STEP_PLOTS)[number]['key'];

export interface CellSplit {
  label: string;
  /** Per metric: value by seed (null: the run has no value). */
  bySeed: Record<MetricKey, Map<number, number | null>>;
  summary: Record<MetricKey, Summary>;
  /** Rates only: the seeded percentile-bootstrap 95% interval of the mean (null with < 2 seeds). */
  boot: Partial<Record<MetricKey, BootstrapInterval | null>>;
  /** Against the baseline (absent for the baseline itself or when there is none). */
  diff?: Record<MetricKey, Summary>;
  /** The paired test of each difference and its Holm-adjusted p over the report (diff-tests.ts). */
  diffP?: Partial<Record<MetricKey, DiffP>>;
}

export interface SplitReport {
  split: string;
  cells: CellSplit[];
}

export interface StepSeries {
  label: string;
  mean: Array<number | null>;
  lo: Array<number | null>;
  hi: Array<number | null>;
  /** Each seed's value at each step (the points behind mean, lo and hi). */
  seeds: number[][];
}

export interface StepPlot {
  key: StepKey;
  title: string;
  steps: number[];
  series: StepSeries[];
}

export interface ExperimentReport {
  name: string;
  title: string;
  baseline: string | null;
  /** Runs per cell label: finished (completed), and those missing or not completed. */
  runs: Array<{ runId: string; label: string; seed: number; status: RunFigures['status'] }>;
  splits: SplitReport[];
  plots: StepPlot[];
  /** The spec's claims, tested ([] when it has none). */
  claims: ClaimResult[];
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
const meanOf = (xs: Array<number | null>) => mean(xs.filter((x): x is number => x !== null));

/** The train split's figures of a run: means over its last TRAIN_WINDOW steps. */
export function trainFigures(steps: readonly StepFigures[]): Figures {
  const last = [...steps].sort((a, b) => a.step - b.step).slice(-TRAIN_WINDOW);
  return {
    em: meanOf(last.map((s) => s.em)),
    tc: meanOf(last.map((s) => s.tc)),
    tp: meanOf(last.map((s) => s.tp)),
    knownSearchRate: meanOf(last.map((s) => s.knownSearchRate)),
    unknownNoSearchRate: meanOf(last.map((s) => s.unknownNoSearchRate)),
  };
}

/** A split's figures of a run: its final evaluation (null when it has none). */
export function evalFigures(f: RunFigures, split: string): Figures | null {
  const after = f.evals.filter((e) => e.when === 'after' && e.split === split);
  if (!after.length) return null;
  const e = after.reduce((a, b) => (b.version >= a.version ? b : a));
  return {
    em: e.em,
    tc: e.tc,
    tp: e.tp,
    knownSearchRate: e.knownSearchRate,
    unknownNoSearchRate: e.unknownNoSearchRate,
  };
}

function stepValue(s: StepFigures, key: StepKey): number | null {
  switch (key) {
    case 'tc':
    case 'em':
    case 'meanResponseLength':
    case 'knownSearchRate':
      return s[key];
    default:
      return s.categoryCounts[key];
  }
}

/** One cell on one split: each seed's figures, their summaries and the rates' bootstrap. */
function cellSplit(label: string, runs: Array<[number, Figures | null]>): CellSplit {
  const bySeed = Object.fromEntries(
    METRICS.map(({ key }) => [key, new Map(runs.map(([seed, f]) => [seed, f?.[key] ?? null]))]),
  ) as CellSplit['bySeed'];
  const summary = Object.fromEntries(
    METRICS.map(({ key }) => [key, summarize([...bySeed[key].values()])]),
  ) as CellSplit['summary'];
  const finite = (m: Map<number, number | null>) =>
    [...m.values()].filter((v): v is number => v !== null && Number.isFinite(v));
  const boot = Object.fromEntries(
    METRICS.filter((m) => m.rate).map(({ key }) => [key, bootstrapMean(finite(bySeed[key]))]),
  );
  return { label, bySeed, summary, boot };
}

/**
 * Builds the report. Only completed runs count (a killed or failed run's figures would mix a
 * shorter training into the means); `figures` maps run ids to their folds.
 */
export function buildReport(
  spec: ExperimentSpec,
  planned: readonly PlannedRun[],
  figures: ReadonlyMap<string, RunFigures>,
): ExperimentReport {
  const status = (r: PlannedRun) => figures.get(r.runId)?.status ?? 'not-started';
  const done = planned.filter((r) => status(r) === 'completed');
  const runsOf = (cell: Cell) => done.filter((r) => r.cell === cell);
  const splitNames = [
    ...new Set(done.flatMap((r) => figures.get(r.runId)!.evals.map((e) => e.split))),
  ].sort();
  const figuresFor = (split: string, r: PlannedRun): Figures | null => {
    const f = figures.get(r.runId)!;
    return split === 'train' ? trainFigures([...f.steps.values()]) : evalFigures(f, split);
  };
  const baselineCell = spec.cells.find((c) => c.label === spec.baseline);
  const splits = ['train', ...splitNames].map((split): SplitReport => {
    const cells = spec.cells.map((cell) =>
      cellSplit(
        cell.label,
        runsOf(cell).map((r) => [r.seed, figuresFor(split, r)]),
      ),
    );
    const base = cells.find((c) => c.label === baselineCell?.label);
    if (base)
      for (const c of cells)
        if (c !== base)
          c.diff = Object.fromEntries(
            METRICS.map(({ key }) => [key, pairedDifference(c.bySeed[key], base.bySeed[key])]),
          ) as CellSplit['diff'];
    return { split, cells };
  });
  const maxStep = Math.max(-1, ...done.flatMap((r) => [...figures.get(r.runId)!.steps.keys()]));
  const steps = Array.from({ length: maxStep + 1 }, (_, i) => i);
  const plots = STEP_PLOTS.map(
    ({ key, title }): StepPlot => ({
      key,
      title,
      steps,
      series: spec.cells.map((cell) => {
        const at = steps.map((step) =>
          runsOf(cell)
            .map((r) => figures.get(r.runId)!.steps.get(step))
            .map((s) => (s ? stepValue(s, key) : null))
            .filter((v): v is number => v !== null),
        );
        return {
          label: cell.label,
          mean: at.map(mean),
          lo: at.map((xs) => (xs.length ? Math.min(...xs) : null)),
          hi: at.map((xs) => (xs.length ? Math.max(...xs) : null)),
          seeds: at,
        };
      }),
    }),
  );
  const report = {
    name: spec.name,
    title: spec.title,
    baseline: baselineCell?.label ?? null,
    runs: planned.map((r) => ({ runId: r.runId, label: r.cell.label, seed: r.seed, status: status(r) })),
    splits,
    plots,
    claims: [] as ClaimResult[],
  };
  testDifferences(splits, report.baseline);
  report.claims = evaluateClaims(spec.claims ?? [], report);
  return report;
}
