/**
 * The report's files: README.md (tables + plot links), one SVG per step plot, and report.json in
 * the shape the dashboard's experiments page reads (src/dashboard/experiments.ts: title, tables of
 * strings/numbers/nulls, plots of x values and series). report.json also carries the numbers
 * behind each table cell (`data`) and each series' band (`lo`, `hi`), which the page ignores.
 */
import { claimsTable, pText } from './claims-render.js';
import { METRICS } from './metrics.js';
import { type CellSplit, type ExperimentReport, type SplitReport, TRAIN_WINDOW } from './report.js';
import type { Summary } from './stats.js';
import { lineChartSvg } from './svg.js';
import { summarySvg } from './svg-summary.js';

const f3 = (x: number) => x.toFixed(3);

/** `0.840 ± 0.012` (n >= 2), `0.840` (one seed), `-` (none). */
export function cellText(s: Summary, signed = false): string {
  if (s.mean === null) return '-';
  const m = signed && s.mean >= 0 ? `+${f3(s.mean)}` : f3(s.mean);
  return s.half === null ? m : `${m} ± ${f3(s.half)}`;
}

/** A rate: the mean and its bootstrap interval `0.500 [0.000, 1.000]`; other metrics: cellText. */
function metricText(c: CellSplit, key: (typeof METRICS)[number]['key']): string {
  const b = c.boot[key];
  const s = c.summary[key];
  if (!b || s.mean === null) return cellText(s);
  return `${f3(s.mean)} [${f3(b.lo)}, ${f3(b.hi)}]`;
}

function splitTitle(split: string): string {
  return split === 'train'
    ? `train (training rollouts, mean of the last ${TRAIN_WINDOW} steps)`
    : `${split} (final evaluation)`;
}

function splitTable(s: SplitReport) {
  return {
    title: splitTitle(s.split),
    columns: ['cell', 'seeds', ...METRICS.map((m) => m.title)],
    rows: s.cells.map((c) => [c.label, c.summary.em.n, ...METRICS.map((m) => metricText(c, m.key))]),
  };
}

function diffTable(s: SplitReport, baseline: string) {
  const cells = s.cells.filter((c) => c.diff);
  return {
    title: `${s.split}: paired difference vs ${baseline} (per seed, then mean ± 95% t-interval; paired t p, Holm over every difference in this report)`,
    columns: ['cell', 'pairs', ...METRICS.map((m) => `Δ ${m.title}`)],
    rows: cells.map((c) => [
      c.label,
      c.diff!.em.n,
      ...METRICS.map((m) => {
        const t = c.diffP?.[m.key];
        const p = t?.p != null ? ` (p ${pText(t.p)}, Holm ${pText(t.pHolm)})` : '';
        return `${cellText(c.diff![m.key], true)}${p}`;
      }),
    ]),
  };
}

function tables(r: ExperimentReport) {
  const claims = r.claims.length ? [claimsTable(r.claims)] : [];
  return [
    ...claims,
    ...r.splits.flatMap((s) => (r.baseline ? [splitTable(s), diffTable(s, r.baseline)] : [splitTable(s)])),
  ];
}

export const plotFile = (key: string) => `plot-${key}.svg`;
export const summaryFile = (split: string, key: string) =>
  `cells-${split.replace(/[^A-Za-z0-9_-]/g, '_')}-${key}.svg`;

export function reportJson(r: ExperimentReport): object {
  return {
    title: r.title,
    tables: tables(r),
    plots: r.plots.map((p) => ({
      title: `${p.title} by step (mean over seeds)`,
      x: { label: 'step', values: p.steps },
      series: p.series.map((s) => ({ label: s.label, values: s.mean, lo: s.lo, hi: s.hi, seeds: s.seeds })),
    })),
    data: { baseline: r.baseline, runs: r.runs, splits: r.splits.map(splitData), claims: r.claims },
  };
}

function splitData(s: SplitReport) {
  return {
    split: s.split,
    cells: s.cells.map((c) => ({
      label: c.label,
      bySeed: Object.fromEntries(METRICS.map((m) => [m.key, Object.fromEntries(c.bySeed[m.key])])),
      summary: c.summary,
      bootstrap: c.boot,
      diff: c.diff ?? null,
      diffP: c.diffP ?? null,
    })),
  };
}

function mdTable(t: { columns: string[]; rows: Array<Array<string | number>> }): string {
  const line = (cells: Array<string | number>) => `| ${cells.join(' | ')} |`;
  return [line(t.columns), line(t.columns.map(() => '---')), ...t.rows.map(line)].join('\n');
}

export function reportMarkdown(r: ExperimentReport): string {
  const out = [`# ${r.title}`, ''];
  const done = r.runs.filter((x) => x.status === 'completed').length;
  out.push(
    `${done} of ${r.runs.length} runs completed (only completed runs count). Each cell is the mean over seeds ± the half-width of the 95% confidence interval from Student's t-distribution with n-1 degrees of freedom (mean ± t(0.975, n-1)·s/√n, s with ddof 1); one seed shows the mean alone. Rates bounded in [0, 1] (EM, the known-search and unknown-no-search rates) show the mean and a 95% percentile-bootstrap interval instead (10000 resamples of the seeds, seeded: the same figures give the same interval), which stays in [0, 1]. Claims: Welch's unpaired or the paired t-test (as the claim declares; the other beside it), two-sided, Holm-adjusted over the claims, MDE = (t(0.975, df) + t(0.8, df))·se, the difference these seeds would detect with 80% power. TC counts tool calls per question, TP = Σ correct / Σ tool calls; the known-search and unknown-no-search rates use the world's oracle.`,
    '',
  );
  for (const t of tables(r)) out.push(`## ${t.title}`, '', mdTable(t), '');
  out.push('## Per step', '', 'One line per cell (mean over seeds), band: min..max over seeds.', '');
  for (const p of r.plots) out.push(`![${p.title}](${plotFile(p.key)})`, '');
  out.push('## Per cell', '', 'Each seed (dots) beside the mean (bar) and its 95% interval (line).', '');
  for (const s of r.splits)
    for (const m of METRICS) out.push(`![${s.split} ${m.title}](${summaryFile(s.split, m.key)})`, '');
  const missing = r.runs.filter((x) => x.status !== 'completed');
  if (missing.length) {
    out.push(
      '## Runs not counted',
      '',
      mdTable({
        columns: ['run', 'cell', 'seed', 'status'],
        rows: missing.map((x) => [x.runId, x.label, x.seed, x.status]),
      }),
      '',
    );
  }
  return out.join('\n');
}

/** Every file of the report: name -> text. */
export function reportFiles(r: ExperimentReport): Map<string, string> {
  const files = new Map<string, string>([
    ['README.md', reportMarkdown(r)],
    ['report.json', `${JSON.stringify(reportJson(r), null, 2)}\n`],
  ]);
  for (const p of r.plots) files.set(plotFile(p.key), lineChartSvg(p));
  for (const s of r.splits)
    for (const m of METRICS)
      files.set(
        summaryFile(s.split, m.key),
        summarySvg(`${m.title}, ${splitTitle(s.split)}`, s.cells, m.key),
      );
  return files;
}
