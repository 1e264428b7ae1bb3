/**
 * The words a stored event may use: rollout paths, stop reasons, turn actions, boundary
 * categories. The event catalog owns them rather than borrowing src/rl's: a stored shape changes
 * only with a new `v` and an upcaster, so an edit in the algorithm must not change it silently.
 * test/events-vocabulary.test.ts fails when these and src/rl/types.ts drift apart, which is the
 * moment to decide whether the stored format changes (a new `v`) or the algorithm adapts.
 */

export const ROLLOUT_PATHS = ['with-tool', 'no-tool'] as const;
export type RolloutPath = (typeof ROLLOUT_PATHS)[number];

export const STOP_REASONS = ['answer', 'eos', 'length', 'tool-limit', 'invalid-action'] as const;
export type StopReason = (typeof STOP_REASONS)[number];

export const TURN_ACTIONS = ['think', 'search', 'answer', 'invalid'] as const;
export type TurnActionKind = (typeof TURN_ACTIONS)[number];

export const BOUNDARY_CATEGORIES = ['tool-dependent', 'efficiency', 'hallucination', 'both-wrong'] as const;
export type BoundaryCategory = (typeof BOUNDARY_CATEGORIES)[number];
export type CategoryCounts = Record<BoundaryCategory, number>;

/**
 * The category a boundary.labeled record must carry for its two path outcomes (WT: any with-tool
 * rollout correct, NT: any no-tool one): the paper's table, as a lookup so the stored rule reads
 * as data. src/rl/types.ts `categoryOf` computes the same; the vocabulary test checks all four.
 */
const CATEGORY_BY_OUTCOME: Record<'11' | '10' | '01' | '00', BoundaryCategory> = {
  '11': 'efficiency',
  '10': 'tool-dependent',
  '01': 'hallucination',
  '00': 'both-wrong',
};

export function categoryOf(wt: boolean, nt: boolean): BoundaryCategory {
  return CATEGORY_BY_OUTCOME[`${wt ? 1 : 0}${nt ? 1 : 0}` as keyof typeof CATEGORY_BY_OUTCOME];
}
