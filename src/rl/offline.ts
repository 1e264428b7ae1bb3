/**
 * Offline AKBE's signal (the AKBE paper's baseline 7, "Offline AKBE": "the same strategy of
 * knowledge boundary-guided signal construction but generates the signal data from a fixed
 * GRPO-trained checkpoint"): each question's boundary label and AKBE target are constructed ONCE,
 * from G_wt with-tool and G_nt no-tool rollouts of a frozen checkpoint, with the same labelling and
 * target rule as on-policy AKBE (boundary.ts `labelBoundary`), and then trained at every step the
 * question is drawn, with the same lambda and L_AKBE as `akbe`.
 *
 * The record (`OfflineTarget`) is what the run's log keeps on each question.assigned: a summary of
 * every frozen rollout (what the label reads: reward with its answer and format, tool calls,
 * generated tokens), the label, and the target's tokens, logprobs (the frozen policy's) and mask.
 * The audit re-labels the summaries with `offlineLabel` and re-derives the batch from the record.
 *
 * Tie-break: labelBoundary's seed at step 0 of the run seed deriveSeed(runSeed, 'offline-akbe'),
 * i.e. one pick per question for the whole run, independent of the steps that draw it.
 */
import { deriveSeed } from '../util/rng.js';
import { labelBoundary } from './boundary.js';
import { RolloutShapeError } from './errors.js';
import { exactMatch } from './reward.js';
import type {
  BoundaryCategory,
  BoundaryLabel,
  RolloutPath,
  RolloutResult,
  StopReason,
  TargetContext,
  TargetSelection,
} from './types.js';

/** One frozen rollout as the label needs it (no tokens: only the target's are kept). */
export interface FrozenRollout {
  rolloutId: string;
  path: RolloutPath;
  index: number;
  answer: string | null;
  formatOk: boolean;
  reward: number;
  /** Executed searches (the target rule's count, as on-policy). */
  toolCalls: number;
  stopReason: StopReason;
  /** Tokens the policy generated (observations excluded): the `shortest` rule's count. */
  generated: number;
}

/** The target's sequence: its prompt (the target's context) and the frozen policy's response. */
export interface OfflineTargetSequence {
  rolloutId: string;
  path: RolloutPath;
  context: RolloutPath;
  promptTokens: number[];
  responseTokens: number[];
  /** log pi_frozen of the generated tokens (0 on observations); never pi_old of a run's step. */
  responseLogprobs: number[];
  responseMask: number[];
}

export interface OfflineTarget {
  /** sha256 of the frozen checkpoint's model.safetensors. */
  checkpointSha256: string;
  rollouts: FrozenRollout[];
  label: {
    wt: boolean;
    nt: boolean;
    category: BoundaryCategory;
    targetRolloutId: string | null;
    tieBreakSeed: number;
  };
  target: OfflineTargetSequence | null;
}

export interface OfflineLabelOptions {
  runSeed: number;
  targetSelection: TargetSelection;
  targetContext: TargetContext;
}

/** The run seed offline labels are drawn with (labelBoundary at step 0). */
export const offlineLabelSeed = (runSeed: number): number => deriveSeed(runSeed, 'offline-akbe');

/** The reward a frozen rollout's recorded answer earns: EM against the gold when the format held. */
export function frozenReward(
  r: Pick<FrozenRollout, 'answer' | 'formatOk' | 'stopReason'>,
  gold: readonly string[],
) {
  return r.formatOk && r.stopReason === 'answer' && r.answer !== null ? exactMatch(r.answer, gold) : 0;
}

export function frozenRolloutOf(r: RolloutResult): FrozenRollout {
  return {
    rolloutId: r.rolloutId,
    path: r.path,
    index: r.index,
    answer: r.answer,
    formatOk: r.formatOk,
    reward: r.reward,
    toolCalls: r.toolCalls,
    stopReason: r.stopReason,
    generated: r.responseMask.reduce((a, m) => a + (m === 1 ? 1 : 0), 0),
  };
}

/** The label of a question's frozen rollouts: labelBoundary over their summaries (it reads nothing else). */
export function offlineLabel(
  questionId: string,
  rollouts: readonly FrozenRollout[],
  o: OfflineLabelOptions,
): BoundaryLabel {
  // labelBoundary reads questionId, rolloutId, path, index, reward, toolCalls and (for `shortest`)
  // the generated-token count through responseMask; a summary carries exactly those.
  const asResult = (r: FrozenRollout) =>
    ({ ...r, questionId, responseMask: new Array<number>(r.generated).fill(1) }) as unknown as RolloutResult;
  return labelBoundary(
    rollouts.filter((r) => r.path === 'with-tool').map(asResult),
    rollouts.filter((r) => r.path === 'no-tool').map(asResult),
    {
      runSeed: offlineLabelSeed(o.runSeed),
      step: 0,
      targetSelection: o.targetSelection,
      targetContext: o.targetContext,
    },
  );
}

/** A question's offline record from its frozen rollouts (both paths). */
export function offlineTargetOf(
  questionId: string,
  results: readonly RolloutResult[],
  o: OfflineLabelOptions & { checkpointSha256: string },
): OfflineTarget {
  const rollouts = results.map(frozenRolloutOf);
  const label = offlineLabel(questionId, rollouts, o);
  let target: OfflineTargetSequence | null = null;
  if (label.target) {
    const { rolloutId, path, context } = label.target;
    const r = results.find((x) => x.rolloutId === rolloutId)!;
    const withToolPrompt = results.find((x) => x.path === 'with-tool')?.promptTokens;
    if (context === 'with-tool' && !withToolPrompt)
      throw new RolloutShapeError(
        rolloutId,
        `question ${questionId}: no with-tool rollout to take the target's prompt from`,
      );
    target = {
      rolloutId,
      path,
      context,
      promptTokens: [...(context === 'with-tool' ? withToolPrompt! : r.promptTokens)],
      responseTokens: [...r.responseTokens],
      responseLogprobs: [...r.responseLogprobs],
      responseMask: [...r.responseMask],
    };
  }
  return {
    checkpointSha256: o.checkpointSha256,
    rollouts,
    label: {
      wt: label.wt,
      nt: label.nt,
      category: label.category,
      targetRolloutId: label.target?.rolloutId ?? null,
      tieBreakSeed: label.tieBreakSeed,
    },
    target,
  };
}
