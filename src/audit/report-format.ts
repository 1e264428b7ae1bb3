/**
 * Text output of `akbe replay` and `akbe runs`: one line per mismatch (sequence first, so that
 * `akbe events tail --from-seq N` finds the event), a summary line, and fixed-width tables.
 */
import type { RunSummary } from '../events/projections/run-summary.js';
import type { AuditReport, Mismatch } from './audit.js';
import type { BoundaryHistoryRow } from './history.js';

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  const s = JSON.stringify(v, (_k, x) =>
    ArrayBuffer.isView(x) ? Array.from(x as unknown as ArrayLike<number>) : x,
  );
  if (s === undefined) return String(v);
  return s.length > 120 ? `${s.slice(0, 117)}...` : s;
}

export function formatMismatch(m: Mismatch): string {
  const ids = [m.questionId, m.rolloutId].filter(Boolean).join(' ');
  return `MISMATCH seq ${m.seq} ${m.eventType} step ${m.step}${ids ? ` ${ids}` : ''}: ${m.field}: recorded ${show(m.recorded)}, recomputed ${show(m.recomputed)}`;
}

export function formatAuditReport(r: AuditReport): string {
  const lines = r.mismatches.map(formatMismatch);
  for (const e of r.errors) lines.push(`ERROR ${e}`);
  if (r.incomplete) lines.push(`INCOMPLETE ${r.incomplete}`);
  for (const n of r.notes) lines.push(`note: ${n}`);
  const c = r.checked;
  const what = `${c.rollouts} rollouts, ${c.labels} labels, ${c.steps} learner steps, ${c.rows} trained rows`;
  const plural = (n: number, word: string, es = 's') => `${n} ${word}${n === 1 ? '' : es}`;
  const problems = [
    r.mismatches.length ? plural(r.mismatches.length, 'mismatch', 'es') : '',
    r.errors.length ? plural(r.errors.length, 'missing or duplicated event') : '',
    r.incomplete ? 'incomplete (no run.finished)' : '',
  ].filter(Boolean);
  lines.push(
    problems.length === 0
      ? `replay of run ${r.runId}: clean (${what} recomputed, no mismatch, no missing event)`
      : `replay of run ${r.runId}: ${problems.join(', ')} (${what} recomputed)`,
  );
  return `${lines.join('\n')}\n`;
}

function table(header: string[], rows: string[][]): string {
  const width = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((x, i) => x.padEnd(width[i]))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

export function formatHistory(questionId: string, rows: readonly BoundaryHistoryRow[]): string {
  if (rows.length === 0) return `question ${questionId}: not in this run\n`;
  const body = rows.map((r) => [
    String(r.step),
    `v${r.policyVersion}`,
    r.category ?? '(unlabelled)',
    r.shifted ? `<- ${r.previousCategory}` : '',
    `${r.withTool.correct}/${r.withTool.total}`,
    `${r.noTool.correct}/${r.noTool.total}`,
    r.withTool.total ? (r.withTool.toolCalls / r.withTool.total).toFixed(2) : '-',
    r.targetRolloutId ?? '-',
    r.seq ? String(r.seq) : '-',
  ]);
  const shifts = rows.filter((r) => r.shifted).length;
  return `boundary history of question ${questionId} (${rows.length} steps, ${shifts} shift${shifts === 1 ? '' : 's'})\n${table(
    ['step', 'policy', 'category', 'shift', 'wt ok', 'nt ok', 'calls/wt', 'target', 'seq'],
    body,
  )}`;
}

export function formatRuns(runs: readonly RunSummary[]): string {
  if (runs.length === 0) return 'no runs\n';
  const body = runs.map((r) => [
    r.runId ?? '?',
    r.status,
    r.algo ?? '-',
    String(r.steps),
    `v${r.policyVersion}`,
    r.latest ? r.latest.em.toFixed(3) : '-',
    r.latest ? r.latest.tc.toFixed(2) : '-',
    r.latest?.tp == null ? '-' : r.latest.tp.toFixed(3),
    r.startedAt ? new Date(r.startedAt).toISOString().slice(0, 19).replace('T', ' ') : '-',
  ]);
  return table(['run', 'status', 'algorithm', 'steps', 'policy', 'em', 'tc', 'tp', 'started (UTC)'], body);
}
