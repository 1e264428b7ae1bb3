/**
 * The algorithm registry with every built-in entry registered. Import algorithms from here.
 * Adding one: its file in this folder, and one import line below.
 */
import './grpo.js';
import './akbe.js';
import './otc-po.js';
import './beta-grpo.js';
import './dpo-akbe.js';
import './offline-akbe.js';
import { getLoss, type LossTerm } from '../losses.js';
import { getAlgorithm, type LossConfig } from './algorithm.js';

export * from './algorithm.js';

/** The validated loss terms of a config's algorithm. */
export function lossTermsFor(cfg: LossConfig & { algo: string }): LossTerm[] {
  const terms = getAlgorithm(cfg.algo).losses(cfg);
  for (const t of terms) getLoss(t.name).validate(t.options);
  return terms;
}
