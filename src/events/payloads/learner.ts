/**
 * The payload of learner.step: the update's metrics, an asynchronous run's dropped groups, and
 * the batch the trainer was given, row by row, for audit (conventions: ./fields.ts).
 */

import {
  array,
  bool,
  nullable,
  number,
  object,
  oneOf,
  optional,
  record,
  type Schema,
  uint32,
} from '../schema.js';
import { count, sha256Hex, text } from './fields.js';
import { type CategoryCounts, ROLLOUT_PATHS, type RolloutPath } from './vocabulary.js';

export interface LearnerMetrics {
  loss: number;
  lossGrpo: number;
  lossAkbe: number;
  gradNorm: number;
  /** Fraction of generated tokens whose ratio was clipped. */
  clipFrac: number;
  kl: number;
  entropy: number;
  /** Exact match over this step's with-tool rollouts. */
  em: number;
  /** Mean tool calls per question. */
  tc: number;
  /** Σ correct / Σ tool calls; null when no tool was called. */
  tp: number | null;
  categoryCounts: CategoryCounts;
  /** Questions whose category changed since their previous labeling. */
  boundaryShifts: number;
  meanResponseLength: number;
  toolCallsPerBatch: number;
  tokensPerSecond: number;
  rolloutSeconds: number;
  trainSeconds: number;
  /** Optimizer updates in this step (mini-batches × epochs). */
  updates: number;
}
/** A group an asynchronous run's learner did not train (src/machines/learner.ts). */
export interface DroppedGroupData {
  questionId: string;
  step: number;
  /** The version that rolled it out. */
  policyVersion: number;
  /** The version its step trains from. */
  trainVersion: number;
  /** 'too-stale': trainVersion - policyVersion > maxStaleness. */
  reason: 'too-stale' | 'step-trained';
}
export interface LearnerStepData {
  /** The version the update started from (pi_prox; = the rollouts' version when synchronous). */
  policyVersionBefore: number;
  policyVersionAfter: number;
  /**
   * Asynchronous runs (maxStaleness >= 1) only: the version that rolled out the step's rows (the
   * envelope's policyVersion too); policyVersionBefore - rolloutVersion is their staleness.
   */
  rolloutVersion?: number;
  /** Asynchronous runs only: the step's groups the learner dropped, with the reason. */
  dropped?: DroppedGroupData[];
  metrics: LearnerMetrics;
  /** Further named scalars (e.g. 'actor/pg_clipfrac_lower'), for experiments. */
  extra: Record<string, number>;
  /** The batch the trainer was given (src/rl assembleBatch), row by row, for audit. */
  batch?: TrainedBatch;
  /**
   * v2: the canonical sha256 of the train request the learner sent (src/events/train-digest.ts);
   * null in v1 logs (the audit says it cannot check the trainer's input there).
   */
  requestSha256?: string | null;
}
export interface TrainedRow {
  rolloutId: string;
  /** The prompt the row's response is conditioned on. */
  context: RolloutPath;
  /** GRPO advantage of the row, as trained (0 on AKBE-only rows). */
  advantage: number;
  /** In L_GRPO / in L_AKBE (the question's target). */
  grpo: boolean;
  akbe: boolean;
  /** The row's weight in L_AKBE (src/rl/batch.ts akbeRowWeights); absent in logs before session 3. */
  akbeWeight?: number;
  /** Index of the mini-batch holding the row. */
  miniBatch: number;
}
export interface TrainedBatch {
  T: number;
  lossTokens: number;
  /** Seed of the question shuffle before the mini-batch split. */
  miniBatchSeed: number;
  rows: TrainedRow[];
  /** dpo-akbe: the preference pairs (row indices), their L_DPO weights and reference logprobs. */
  dpoPairs?: TrainedDpoPair[];
}
export interface TrainedDpoPair {
  chosen: number;
  rejected: number;
  /** The pair's weight in its mini-batch's L_DPO (1 / pairs there). */
  weight: number;
  /** Sequence logprobs of the chosen and rejected rows under the frozen reference v0. */
  refChosen?: number;
  refRejected?: number;
}
const trainedBatch = object<TrainedBatch>({
  T: count(),
  lossTokens: count(),
  miniBatchSeed: uint32(),
  rows: array(
    object<TrainedRow>({
      rolloutId: text(),
      context: oneOf(ROLLOUT_PATHS),
      advantage: number(),
      grpo: bool(),
      akbe: bool(),
      akbeWeight: optional(number({ min: 0 })),
      miniBatch: count(),
    }),
  ),
  dpoPairs: optional(
    array(
      object<TrainedDpoPair>({
        chosen: count(),
        rejected: count(),
        weight: number({ min: 0, max: 1 }),
        refChosen: optional(number({ max: 0 })),
        refRejected: optional(number({ max: 0 })),
      }),
    ),
  ),
});
export const learnerStep: Schema<LearnerStepData> = object<LearnerStepData>(
  {
    policyVersionBefore: count(),
    policyVersionAfter: count(),
    metrics: object<LearnerMetrics>({
      loss: number(),
      lossGrpo: number(),
      lossAkbe: number(),
      gradNorm: number({ min: 0 }),
      clipFrac: number({ min: 0, max: 1 }),
      kl: number(),
      entropy: number(),
      em: number({ min: 0, max: 1 }),
      tc: number({ min: 0 }),
      tp: nullable(number({ min: 0 })),
      categoryCounts: object<CategoryCounts>({
        'tool-dependent': count(),
        efficiency: count(),
        hallucination: count(),
        'both-wrong': count(),
      }),
      boundaryShifts: count(),
      meanResponseLength: number({ min: 0 }),
      toolCallsPerBatch: count(),
      tokensPerSecond: number({ min: 0 }),
      rolloutSeconds: number({ min: 0 }),
      trainSeconds: number({ min: 0 }),
      updates: count(),
    }),
    extra: record(number()),
    batch: optional(trainedBatch),
    requestSha256: optional(nullable(sha256Hex())),
    rolloutVersion: optional(count()),
    dropped: optional(
      array(
        object<DroppedGroupData>({
          questionId: text(),
          step: count(),
          policyVersion: count(),
          trainVersion: count(),
          reason: oneOf(['too-stale', 'step-trained'] as const),
        }),
      ),
    ),
  },
  (d) => {
    if (d.policyVersionAfter < d.policyVersionBefore)
      return ['policyVersionAfter', `must be >= policyVersionBefore (${d.policyVersionBefore})`];
    if (d.rolloutVersion !== undefined && d.rolloutVersion > d.policyVersionBefore)
      return ['rolloutVersion', `must be <= policyVersionBefore (${d.policyVersionBefore})`];
    return null;
  },
);
