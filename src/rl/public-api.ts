/**
 * `akbe/rl`: the pure algorithm, for a user who trains with akbe or extends it. Registries
 * (algorithms, advantages, losses, row kinds) are module-level, so a registration made through
 * this entry is seen by everything akbe runs in the same process (a plugin, docs/api.md). No I/O is
 * reachable from here (test/import-rules.test.ts checks src/rl imports none).
 */

export { getAdvantage, grpoAdvantages, registerAdvantage } from './advantages.js';
export type { Algorithm, LossConfig } from './algorithms/index.js';
export {
  getAlgorithm,
  listAlgorithms,
  lossTermsFor,
  outcomeRewards,
  registerAlgorithm,
  rowKindsOf,
} from './algorithms/index.js';
export { labelBoundary } from './boundary.js';
export { type TrainConfig, validateTrainConfig } from './config.js';
export { checkFormat } from './format.js';
export {
  effectiveLambda,
  getLoss,
  type LossSpec,
  type LossTerm,
  listLosses,
  registerLoss,
} from './losses.js';
export {
  exactMatch,
  extractAnswer,
  normalizeAnswer,
  scoreTrajectory,
  type TrajectoryScore,
} from './reward.js';
export {
  type BatchQuestion,
  type BatchRow,
  listRowKinds,
  type QuestionRow,
  type RowKind,
  registerRowKind,
} from './row-kinds.js';
export type * from './types.js';
export { BOUNDARY_CATEGORIES, categoryOf, ROLLOUT_PATHS, STOP_REASONS, TURN_ACTIONS } from './types.js';
