/**
 * The payloads of a question's life in a step: question.assigned (what the rollouts answer),
 * group.completed (their rewards by path), boundary.labeled (the AKBE category and target)
 * (conventions: ./fields.ts).
 */

import { array, bool, nullable, number, object, oneOf, optional, type Schema, uint32 } from '../schema.js';
import { count, text } from './fields.js';
import type { OfflineTarget } from './offline.js';
import { offlineTarget } from './offline.js';
import { BOUNDARY_CATEGORIES, type BoundaryCategory, categoryOf } from './vocabulary.js';

export interface QuestionAssignedData {
  text: string;
  goldAnswers: string[];
  /** Dataset split or world question family, e.g. 'train', 'single-hop', 'multi-hop'. */
  split: string;
  /** Trajectories per path (G_wt, G_nt). */
  groupSize: { withTool: number; noTool: number };
  /**
   * v2: the world's oracle, whether every fact the question needs was in the base policy's
   * pretraining mix. Absent when the questions come without one (and on every v1 event).
   */
  known?: boolean;
  /**
   * offline-akbe only (an optional field: older logs replay unchanged): the question's label and
   * target, built once from the frozen checkpoint's rollouts (src/rl/offline.ts); the same record
   * on every step that draws the question.
   */
  offline?: OfflineTarget;
}
export const questionAssigned: Schema<QuestionAssignedData> = object<QuestionAssignedData>({
  text: text(),
  goldAnswers: array(text(), { min: 1 }),
  split: text(),
  groupSize: object({ withTool: count(), noTool: count() }),
  known: optional(bool()),
  offline: optional(offlineTarget),
});

export interface GroupPath {
  rolloutIds: string[];
  rewards: number[];
}
export interface GroupCompletedData {
  withTool: GroupPath;
  noTool: GroupPath;
}
const groupPath = object<GroupPath>({ rolloutIds: array(text()), rewards: array(number()) }, (g) =>
  g.rewards.length === g.rolloutIds.length ? null : ['rewards', 'must have one reward per rollout id'],
);
export const groupCompleted: Schema<GroupCompletedData> = object<GroupCompletedData>({
  withTool: groupPath,
  noTool: groupPath,
});

export interface BoundaryLabeledData {
  /** Any with-tool trajectory correct. */
  wt: boolean;
  /** Any no-tool trajectory correct. */
  nt: boolean;
  category: BoundaryCategory;
  /** The selected AKBE target y*, null when there is none (both-wrong). */
  targetRolloutId: string | null;
  /** How the target was chosen, e.g. 'min-tool-calls', 'shortest', 'random-correct-no-tool', 'none'. */
  selectionRule: string;
  /** Seed of the uniform tie-break among equally good candidates. */
  tieBreakSeed: number;
  /** The category at this question's previous labeling, null the first time. */
  previousCategory: BoundaryCategory | null;
}
export const boundaryLabeled: Schema<BoundaryLabeledData> = object<BoundaryLabeledData>(
  {
    wt: bool(),
    nt: bool(),
    category: oneOf(BOUNDARY_CATEGORIES),
    targetRolloutId: nullable(text()),
    selectionRule: text(),
    tieBreakSeed: uint32(),
    previousCategory: nullable(oneOf(BOUNDARY_CATEGORIES)),
  },
  (d) => {
    const expected = categoryOf(d.wt, d.nt);
    if (d.category !== expected)
      return ['category', `must be '${expected}' when wt=${d.wt} and nt=${d.nt} (got '${d.category}')`];
    if (d.category === 'both-wrong' && d.targetRolloutId !== null)
      return ['targetRolloutId', 'must be null for both-wrong'];
    return null;
  },
);
