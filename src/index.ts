/** The public API of the akbe package. */

export { getAdvantage, grpoAdvantages, registerAdvantage } from './rl/advantages.js';
export { labelBoundary } from './rl/boundary.js';
export { type TrainConfig, validateTrainConfig } from './rl/config.js';
export { checkFormat } from './rl/format.js';
export { exactMatch, extractAnswer, normalizeAnswer, scoreTrajectory } from './rl/reward.js';
export type * from './rl/types.js';
export { deriveSeed, Rng } from './util/rng.js';
