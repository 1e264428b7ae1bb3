/**
 * Knowledge-boundary labels and AKBE targets (paper §4.2; DESIGN.md §1.3).
 *
 *   WT = any with-tool rollout correct, NT = any no-tool rollout correct
 *   WT & !NT  tool-dependent  target: a correct with-tool rollout with the fewest tool calls
 *                             (`min-tool-calls`, the paper) or fewest generated tokens (`shortest`)
 *   WT &  NT  efficiency      target: a correct no-tool rollout, uniformly at random
 *  !WT &  NT  hallucination   target: a correct no-tool rollout, uniformly at random
 *  !WT & !NT  both-wrong      no target
 *
 * "Correct" is reward 1 (format ok and EM). Ties are broken uniformly at random by an Rng seeded
 * with deriveSeed(runSeed, 'target', step, questionId); candidates are first sorted by their index
 * in the group, so the pick does not depend on the order in which rollouts finished.
 */
import { deriveSeed, Rng } from '../util/rng.js';
import { RolloutShapeError } from './errors.js';
import {
  type BoundaryLabel,
  categoryOf,
  type RolloutResult,
  type TargetContext,
  type TargetSelection,
} from './types.js';

export interface LabelOptions {
  runSeed: number;
  step: number;
  /** Tool-dependent target: fewest tool calls (paper, default) or fewest generated tokens. */
  targetSelection?: TargetSelection;
  /** Prompt a no-tool target is scored under: the with-tool prompt (default) or its own. */
  targetContext?: TargetContext;
}

/** The tie-break seed of a question's target pick. */
export function targetSeed(runSeed: number, step: number, questionId: string): number {
  return deriveSeed(runSeed, 'target', step, questionId);
}

/** Tokens the policy wrote (observation tokens excluded). */
export function generatedLength(r: RolloutResult): number {
  let n = 0;
  for (const m of r.responseMask) n += m;
  return n;
}

const isCorrect = (r: RolloutResult) => r.reward === 1;
const byIndex = (a: RolloutResult, b: RolloutResult) =>
  a.index - b.index || (a.rolloutId < b.rolloutId ? -1 : 1);

/** Labels one question's knowledge boundary from its with-tool and no-tool rollouts (the paper's four categories) and picks the AKBE target trajectory, if any. */
export function labelBoundary(
  withTool: readonly RolloutResult[],
  noTool: readonly RolloutResult[],
  opts: LabelOptions,
): BoundaryLabel {
  const all = [...withTool, ...noTool];
  if (all.length === 0)
    throw new RolloutShapeError(undefined, 'labelBoundary: a question needs at least one rollout');
  const questionId = all[0].questionId;
  for (const r of all) {
    if (r.questionId !== questionId) {
      throw new RolloutShapeError(
        r.rolloutId,
        `labelBoundary: rollout ${r.rolloutId} is of question ${r.questionId}, not ${questionId}`,
      );
    }
  }
  for (const r of withTool)
    if (r.path !== 'with-tool')
      throw new RolloutShapeError(r.rolloutId, `labelBoundary: ${r.rolloutId} is not a with-tool rollout`);
  for (const r of noTool)
    if (r.path !== 'no-tool')
      throw new RolloutShapeError(r.rolloutId, `labelBoundary: ${r.rolloutId} is not a no-tool rollout`);

  const correctWt = withTool.filter(isCorrect).sort(byIndex);
  const correctNt = noTool.filter(isCorrect).sort(byIndex);
  const wt = correctWt.length > 0;
  const nt = correctNt.length > 0;
  const category = categoryOf(wt, nt);
  const tieBreakSeed = targetSeed(opts.runSeed, opts.step, questionId);
  const rng = new Rng(tieBreakSeed);

  let target: BoundaryLabel['target'] = null;
  if (category === 'tool-dependent') {
    const cost = opts.targetSelection === 'shortest' ? generatedLength : (r: RolloutResult) => r.toolCalls;
    const best = Math.min(...correctWt.map(cost));
    const ties = correctWt.filter((r) => cost(r) === best);
    const pick = rng.pick(ties);
    target = { rolloutId: pick.rolloutId, path: 'with-tool', context: 'with-tool', candidates: ties.length };
  } else if (category === 'efficiency' || category === 'hallucination') {
    const pick = rng.pick(correctNt);
    const context = (opts.targetContext ?? 'with-tool') === 'with-tool' ? 'with-tool' : 'no-tool';
    target = { rolloutId: pick.rolloutId, path: 'no-tool', context, candidates: correctNt.length };
  }
  return { questionId, wt, nt, category, target, tieBreakSeed };
}
