/**
 * Metrics of the paper: EM, TC (mean tool calls per question), TP (tool productivity,
 * Σ correct / Σ tool calls), per split and overall; and the per-step training metrics of DESIGN.md
 * (tool calls per batch, mean response length, category counts, boundary shifts).
 */
import type { BoundaryCategory, BoundaryLabel, QuestionGroup } from './types.js';

/** One evaluated answer: a question of a split answered by one trajectory. */
export interface EvalRecord {
  split: string;
  correct: 0 | 1;
  toolCalls: number;
}

export interface EvalMetrics {
  n: number;
  /** Mean exact match. */
  em: number;
  /** Mean tool calls per question. */
  tc: number;
  /**
   * Σ correct / Σ tool calls. With no tool call at all the ratio is undefined (0/0, or x/0 for a
   * policy that answers everything from memory): null, printed as "n/a", never Infinity or NaN,
   * which JSON and msgpack readers would mangle.
   */
  tp: number | null;
}

function summarize(records: readonly EvalRecord[]): EvalMetrics {
  const n = records.length;
  let correct = 0;
  let calls = 0;
  for (const r of records) {
    correct += r.correct;
    calls += r.toolCalls;
  }
  return { n, em: n ? correct / n : 0, tc: n ? calls / n : 0, tp: calls > 0 ? correct / calls : null };
}

/** Metrics per split, plus `overall` over every record. */
export function evalMetrics(records: readonly EvalRecord[]): {
  overall: EvalMetrics;
  splits: Record<string, EvalMetrics>;
} {
  const bySplit = new Map<string, EvalRecord[]>();
  for (const r of records) {
    const list = bySplit.get(r.split) ?? [];
    list.push(r);
    bySplit.set(r.split, list);
  }
  const splits: Record<string, EvalMetrics> = {};
  for (const [split, list] of [...bySplit].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    splits[split] = summarize(list);
  return { overall: summarize(records), splits };
}

export type CategoryCounts = Record<BoundaryCategory, number>;

export function emptyCategoryCounts(): CategoryCounts {
  return { 'tool-dependent': 0, efficiency: 0, hallucination: 0, 'both-wrong': 0 };
}

export interface BoundaryShift {
  questionId: string;
  from: BoundaryCategory;
  to: BoundaryCategory;
}

/**
 * Questions whose category changed since the last step they were labelled in. A question seen for
 * the first time is not a shift. Returns the shifts and the updated last-category map (a new map).
 */
export function boundaryShifts(
  previous: ReadonlyMap<string, BoundaryCategory>,
  labels: readonly BoundaryLabel[],
): { shifts: BoundaryShift[]; latest: Map<string, BoundaryCategory> } {
  const latest = new Map(previous);
  const shifts: BoundaryShift[] = [];
  for (const l of labels) {
    const from = previous.get(l.questionId);
    if (from !== undefined && from !== l.category)
      shifts.push({ questionId: l.questionId, from, to: l.category });
    latest.set(l.questionId, l.category);
  }
  return { shifts, latest };
}

export interface StepMetrics {
  questions: number;
  /** Mean reward of the with-tool rollouts (the GRPO training reward). */
  trainReward: number;
  /** Mean EM over with-tool rollouts (format failures count as wrong). */
  withToolEm: number;
  /** Mean EM over no-tool rollouts. */
  noToolEm: number;
  /** Σ tool calls over every with-tool rollout of the batch (the paper's Figure 10, left). */
  toolCallsPerBatch: number;
  /** Mean tool calls per with-tool rollout. */
  meanToolCalls: number;
  /** Mean response length of with-tool rollouts, generated + observation tokens (verl's response_length). */
  meanResponseLength: number;
  /** Mean tokens the policy generated per with-tool rollout (observations excluded). */
  meanGeneratedLength: number;
  formatFailures: number;
  categories: CategoryCounts;
  boundaryShifts: number;
}

function mean(xs: readonly number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

export function stepMetrics(
  groups: readonly QuestionGroup[],
  labels: readonly BoundaryLabel[],
  shifts: readonly BoundaryShift[],
): StepMetrics {
  const wt = groups.flatMap((g) => g.withTool);
  const nt = groups.flatMap((g) => g.noTool);
  const categories = emptyCategoryCounts();
  for (const l of labels) categories[l.category] += 1;
  const toolCallsPerBatch = wt.reduce((a, r) => a + r.toolCalls, 0);
  return {
    questions: groups.length,
    trainReward: mean(wt.map((r) => r.reward)),
    withToolEm: mean(wt.map((r) => r.em)),
    noToolEm: mean(nt.map((r) => r.em)),
    toolCallsPerBatch,
    meanToolCalls: wt.length ? toolCallsPerBatch / wt.length : 0,
    meanResponseLength: mean(wt.map((r) => r.responseTokens.length)),
    meanGeneratedLength: mean(wt.map((r) => r.responseMask.reduce((a, m) => a + m, 0))),
    formatFailures: [...wt, ...nt].filter((r) => !r.formatOk).length,
    categories,
    boundaryShifts: shifts.length,
  };
}
