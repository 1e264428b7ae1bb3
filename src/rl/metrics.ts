/**
 * Metrics of the paper: EM, TC (mean tool calls per question), TP (tool productivity,
 * Σ correct / Σ tool calls), with one definition of a counted tool call; and the per-step training metrics of DESIGN.md
 * (tool calls per batch, mean response length, category counts, boundary shifts).
 */
import type { BoundaryCategory, BoundaryLabel, CategoryCounts, QuestionGroup } from './types.js';

/**
 * How TC counts a rollout's tool calls. 'emitted' (the default since session 3): every well-formed
 * call the policy emitted on the with-tool path, the one refused by `maxToolCalls` included (a
 * rollout that asks for a 7th search at a limit of 6 counts 7). This is how Search-R1's agent loop
 * (search_r1/llm_agent/generation.py, run_llm_loop), which the paper's verl setup follows, counts:
 * its final turn runs execute_predictions(do_search=False) and still adds the turn's search to
 * valid_search_stats. 'executed': only the calls the tool answered (akbe before session 3; the
 * audit uses it for logs that do not record `toolCallCount`).
 */
export type ToolCallCount = 'emitted' | 'executed';
export const DEFAULT_TOOL_CALL_COUNT: ToolCallCount = 'emitted';

/**
 * A rollout's tool calls as TC counts them: the calls executed (`toolCalls`, what tool.called
 * events record) plus the refused one of a rollout that stopped on 'tool-limit'. The one definition
 * that training metrics, evaluation and the audit share.
 */
export function countedToolCalls(
  r: { toolCalls: number; stopReason: string },
  count: ToolCallCount = DEFAULT_TOOL_CALL_COUNT,
): number {
  return r.toolCalls + (count === 'emitted' && r.stopReason === 'tool-limit' ? 1 : 0);
}

/** One answered question: its correctness (EM with the format rule) and its tool calls. */
export interface AnswerRecord {
  correct: number;
  toolCalls: number;
  stopReason: string;
}

export interface AnswerMetrics {
  n: number;
  /** Mean exact match. */
  em: number;
  /** TC: mean tool calls per question (countedToolCalls). */
  tc: number;
  /**
   * TP = Σ correct / Σ tool calls (the paper's tool productivity). With no tool call at all the
   * ratio is undefined (0/0, or x/0 for a policy that answers everything from memory): null, printed
   * as "n/a", never Infinity or NaN, which JSON and msgpack readers would mangle.
   */
  tp: number | null;
}

/** The paper's EM, TC and TP over a set of answers (evaluation: src/world/eval.ts). */
export function answerMetrics(
  records: readonly AnswerRecord[],
  count: ToolCallCount = DEFAULT_TOOL_CALL_COUNT,
): AnswerMetrics {
  const n = records.length;
  let correct = 0;
  let calls = 0;
  for (const r of records) {
    correct += r.correct;
    calls += countedToolCalls(r, count);
  }
  return { n, em: n ? correct / n : 0, tc: n ? calls / n : 0, tp: calls > 0 ? correct / calls : null };
}

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
  /** Σ tool calls (countedToolCalls) over every with-tool rollout of the batch (the paper's Figure 10, left). */
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
  count: ToolCallCount = DEFAULT_TOOL_CALL_COUNT,
): StepMetrics {
  const wt = groups.flatMap((g) => g.withTool);
  const nt = groups.flatMap((g) => g.noTool);
  const categories = emptyCategoryCounts();
  for (const l of labels) categories[l.category] += 1;
  const toolCallsPerBatch = wt.reduce((a, r) => a + countedToolCalls(r, count), 0);
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

/**
 * The boundary as the world's oracle sees it, over one step's with-tool rollouts (the definition
 * of src/world/eval.ts's `searchRateKnown` / `noSearchRateUnknown`, so training and evaluation
 * report the same quantity):
 *   knownSearchRate     = with-tool rollouts with >= 1 tool call / with-tool rollouts, on questions
 *                         whose facts the base policy knows (searching there is wasted);
 *   unknownNoSearchRate = with-tool rollouts with no tool call / with-tool rollouts, on questions
 *                         it does not know (answering those from memory is a guess).
 * A tool call is counted as TC counts it (countedToolCalls). Questions the oracle says nothing
 * about (`knownOf` undefined) are left out; a rate with no rollout to count is null.
 */
export interface OracleSearchRates {
  knownSearchRate: number | null;
  unknownNoSearchRate: number | null;
}

export function oracleSearchRates(
  groups: readonly QuestionGroup[],
  knownOf: (questionId: string) => boolean | undefined,
  count: ToolCallCount = DEFAULT_TOOL_CALL_COUNT,
): OracleSearchRates {
  let known = 0;
  let knownSearched = 0;
  let unknown = 0;
  let unknownSkipped = 0;
  for (const g of groups) {
    const k = knownOf(g.questionId);
    if (k === undefined) continue;
    for (const r of g.withTool) {
      const searched = countedToolCalls(r, count) > 0;
      if (k) {
        known++;
        if (searched) knownSearched++;
      } else {
        unknown++;
        if (!searched) unknownSkipped++;
      }
    }
  }
  return {
    knownSearchRate: known > 0 ? knownSearched / known : null,
    unknownNoSearchRate: unknown > 0 ? unknownSkipped / unknown : null,
  };
}

/** The non-null rates, as learner.step's `extra` records them. */
export function oracleRatesExtra(r: OracleSearchRates): Record<string, number> {
  const out: Record<string, number> = {};
  if (r.knownSearchRate !== null) out.knownSearchRate = r.knownSearchRate;
  if (r.unknownNoSearchRate !== null) out.unknownNoSearchRate = r.unknownNoSearchRate;
  return out;
}
