/**
 * DPO-AKBE's preference pairs (the AKBE paper's appendix, "DPO-based variant"; DESIGN.md §1):
 *
 *   chosen   y_w = the question's AKBE target (boundary.ts: the fewest-calls correct with-tool
 *                  rollout, or a random correct no-tool rollout), under the target's context
 *   rejected y_l = the with-tool rollout with the most tool calls among the "incorrect or
 *                  inefficient" ones: every with-tool rollout other than the target that is
 *                  wrong (reward 0) or makes more calls than the target (a no-tool target
 *                  makes 0), correct or incorrect alike, as the appendix says ("maximum
 *                  divergence from the preferred pattern")
 *
 * A question has a pair when it has a target and at least one such candidate; a both-wrong
 * question (no target) or a group whose other rollouts are all correct with no more calls than
 * the target has none. Ties in the call count are broken uniformly at random by an Rng seeded with
 * deriveSeed(runSeed, 'dpo-rejected', step, questionId), candidates sorted by group index first
 * (as target selection does), so the audit recomputes the same pick.
 *
 * Calls are counted as TC counts them (`countedToolCalls`, the run's toolCallCount).
 */
import { deriveSeed, Rng } from '../util/rng.js';
import { countedToolCalls, type ToolCallCount } from './metrics.js';
import type { BoundaryLabel, QuestionGroup } from './types.js';

export interface RejectedOptions {
  runSeed: number;
  step: number;
  toolCallCount?: ToolCallCount;
}

/** The tie-break seed of a question's rejected pick. */
export function rejectedSeed(runSeed: number, step: number, questionId: string): number {
  return deriveSeed(runSeed, 'dpo-rejected', step, questionId);
}

/** The rolloutId of the question's rejected trajectory, or null when it has no pair. */
export function rejectedFor(group: QuestionGroup, label: BoundaryLabel, o: RejectedOptions): string | null {
  const target = label.target;
  if (!target) return null;
  const calls = (r: { toolCalls: number; stopReason: string }) => countedToolCalls(r, o.toolCallCount);
  const chosen = group.withTool.find((r) => r.rolloutId === target.rolloutId);
  const chosenCalls = chosen ? calls(chosen) : 0;
  const candidates = group.withTool
    .filter((r) => r.rolloutId !== target.rolloutId && (r.reward !== 1 || calls(r) > chosenCalls))
    .sort((a, b) => a.index - b.index || (a.rolloutId < b.rolloutId ? -1 : 1));
  if (candidates.length === 0) return null;
  const most = Math.max(...candidates.map(calls));
  const ties = candidates.filter((r) => calls(r) === most);
  return new Rng(rejectedSeed(o.runSeed, o.step, group.questionId)).pick(ties).rolloutId;
}
