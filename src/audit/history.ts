/**
 * A question's knowledge-boundary history across a run: one row per step the question was rolled
 * out in, with its label, target and the evidence behind it (correct rollouts per path, tool calls).
 * This is the first-class record DESIGN.md §1.6 asks for: how a question's boundary moved as the
 * policy learned. Pure: read from a RunLog.
 */
import type { BoundaryCategory } from '../events/catalog.js';
import { countedToolCalls } from '../rl/metrics.js';
import { settingsOf } from './recompute.js';
import type { RunLog } from './run-log.js';
import { seqOf } from './run-log.js';

export interface BoundaryHistoryRow {
  step: number;
  policyVersion: number;
  category: BoundaryCategory | null;
  previousCategory: BoundaryCategory | null;
  /** Category changed since the question's previous labelled step. */
  shifted: boolean;
  wt: boolean | null;
  nt: boolean | null;
  /** toolCalls: Σ over the with-tool rollouts, counted as TC counts them (countedToolCalls). */
  withTool: { correct: number; total: number; toolCalls: number };
  noTool: { correct: number; total: number };
  targetRolloutId: string | null;
  selectionRule: string | null;
  /** Stream sequence of the boundary.labeled event (0 when none was recorded). */
  seq: number;
}

export function boundaryHistory(log: RunLog, questionId: string): BoundaryHistoryRow[] {
  const rows: BoundaryHistoryRow[] = [];
  let last: BoundaryCategory | null = null;
  const count = settingsOf(log.started).toolCallCount;
  for (const s of log.steps.values()) {
    const q = s.questions.get(questionId);
    if (!q) continue;
    const done = [...q.rollouts.values()].flatMap((r) => (r.completed ? [r.completed] : []));
    const wt = done.filter((d) => d.data.path === 'with-tool');
    const nt = done.filter((d) => d.data.path === 'no-tool');
    const label = q.label?.data;
    const category = label?.category ?? null;
    rows.push({
      step: s.step,
      // The version the label describes (its group's; an asynchronous step trains from a later one).
      policyVersion:
        q.label?.meta.policyVersion ?? s.started?.data.policyVersion ?? done[0]?.meta.policyVersion ?? s.step,
      category,
      previousCategory: label ? label.previousCategory : last,
      shifted: category !== null && last !== null && category !== last,
      wt: label?.wt ?? null,
      nt: label?.nt ?? null,
      withTool: {
        correct: wt.filter((d) => d.data.reward === 1).length,
        total: wt.length,
        toolCalls: wt.reduce((a, d) => a + countedToolCalls(d.data, count), 0),
      },
      noTool: { correct: nt.filter((d) => d.data.reward === 1).length, total: nt.length },
      targetRolloutId: label?.targetRolloutId ?? null,
      selectionRule: label?.selectionRule ?? null,
      seq: seqOf(q.label),
    });
    if (category !== null) last = category;
  }
  return rows;
}

/** Question ids that appear in the run, in order of first appearance. */
export function questionIdsOf(log: RunLog): string[] {
  const ids = new Set<string>();
  for (const s of log.steps.values()) for (const id of s.questions.keys()) ids.add(id);
  return [...ids];
}
