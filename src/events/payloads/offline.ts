/**
 * The schema of offline-akbe's record on question.assigned (`offline`, an optional field: logs
 * without it replay unchanged): the frozen checkpoint's rollouts as the label reads them, the
 * label, and the target's sequence. The stored types are the catalog's own; src/rl/offline.ts's
 * OfflineTarget has the same shape (the compiler checks it where the orchestrator records one).
 */

import { array, bool, int, nullable, number, object, oneOf, type Schema, string, uint32 } from '../schema.js';
import { count } from './fields.js';
import {
  BOUNDARY_CATEGORIES,
  type BoundaryCategory,
  ROLLOUT_PATHS,
  type RolloutPath,
  STOP_REASONS,
  type StopReason,
} from './vocabulary.js';

export interface FrozenRollout {
  rolloutId: string;
  path: RolloutPath;
  index: number;
  answer: string | null;
  formatOk: boolean;
  reward: number;
  /** Executed searches. */
  toolCalls: number;
  stopReason: StopReason;
  /** Tokens the policy generated (observations excluded). */
  generated: number;
}

export interface OfflineTargetSequence {
  rolloutId: string;
  path: RolloutPath;
  context: RolloutPath;
  promptTokens: number[];
  responseTokens: number[];
  /** log pi_frozen of the generated tokens (0 on observations). */
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

const frozenRollout = object<FrozenRollout>({
  rolloutId: string({ nonEmpty: true }),
  path: oneOf(ROLLOUT_PATHS),
  index: count(),
  answer: nullable(string()),
  formatOk: bool(),
  reward: number({ min: 0, max: 1 }),
  toolCalls: count(),
  stopReason: oneOf(STOP_REASONS),
  generated: count(),
});

const targetSequence = object<OfflineTargetSequence>(
  {
    rolloutId: string({ nonEmpty: true }),
    path: oneOf(ROLLOUT_PATHS),
    context: oneOf(ROLLOUT_PATHS),
    promptTokens: array(count(), { min: 1 }),
    responseTokens: array(count(), { min: 1 }),
    responseLogprobs: array(number({ max: 0 })),
    responseMask: array(int({ min: 0, max: 1 })),
  },
  (t) => {
    const n = t.responseTokens.length;
    if (t.responseLogprobs.length !== n)
      return [
        'responseLogprobs',
        `must have one value per response token (${n}, got ${t.responseLogprobs.length})`,
      ];
    if (t.responseMask.length !== n)
      return ['responseMask', `must have one value per response token (${n}, got ${t.responseMask.length})`];
    return null;
  },
);

export const offlineTarget: Schema<OfflineTarget> = object<OfflineTarget>(
  {
    checkpointSha256: string({ pattern: /^[0-9a-f]{64}$/, hint: 'a sha256 in hex' }),
    rollouts: array(frozenRollout, { min: 1 }),
    label: object({
      wt: bool(),
      nt: bool(),
      category: oneOf(BOUNDARY_CATEGORIES),
      targetRolloutId: nullable(string({ nonEmpty: true })),
      tieBreakSeed: uint32(),
    }),
    target: nullable(targetSequence),
  },
  (d) => {
    if ((d.target?.rolloutId ?? null) !== d.label.targetRolloutId)
      return ['target.rolloutId', `must be the label's targetRolloutId (${d.label.targetRolloutId})`];
    if (d.target && !d.rollouts.some((r) => r.rolloutId === d.target!.rolloutId))
      return ['target.rolloutId', 'must be one of the frozen rollouts'];
    return null;
  },
);
