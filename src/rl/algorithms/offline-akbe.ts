/**
 * Offline AKBE, the AKBE paper's baseline (7) ("an offline variant of AKBE that uses the same
 * strategy of knowledge boundary-guided signal construction but generates the signal data from a
 * fixed GRPO-trained checkpoint", §5.1; its result paragraph: lower TC than AKBE, lower EM):
 *
 *   L = L_GRPO + lambda * L_AKBE      (as `akbe`: the same lambda, aggregation and form)
 *
 * with L_GRPO on the on-policy rollouts (unchanged) and L_AKBE over each question's target
 * labelled ONCE from G_wt + G_nt rollouts of the frozen checkpoint `frozenPolicy` (a config key:
 * options are numbers), made before step 0 for every question the run's seed will draw
 * (src/rl/offline.ts for the labels, src/actors/orchestrator/offline-targets.ts for the rollouts). The target
 * keeps the frozen policy's tokens; under the `clipped` form its pi_old is recomputed with the
 * step's policy like a re-conditioned target's (batch.ts), so the ratio starts at 1.
 */
import { getAlgorithm, outcomeRewards, registerAlgorithm } from './algorithm.js';

registerAlgorithm({
  name: 'offline-akbe',
  description:
    'GRPO + lambda * L_AKBE over boundary targets built once from a frozen checkpoint (frozenPolicy)',
  source:
    'the AKBE paper (../shared/reference/akbe-paper.txt) §5.1 baseline (7) and its Offline AKBE paragraph',
  akbeTargets: false,
  offlineTargets: true,
  // The frozen checkpoint's no-tool probe (G_nt rollouts) labels the boundary as on-policy AKBE's
  // does; the run's own no-tool rollouts keep measuring the on-policy boundary (category counts).
  needsNoTool: true,
  rowKinds: ['offline-target'],
  options: {},
  rewards: outcomeRewards,
  losses: (cfg) => getAlgorithm('akbe').losses(cfg),
});
