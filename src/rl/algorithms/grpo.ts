/** GRPO alone, the base method: the outcome reward, group-relative advantages, clipped surrogate. */
import { LossName } from '../losses.js';
import { outcomeRewards, registerAlgorithm } from './algorithm.js';

registerAlgorithm({
  name: 'grpo',
  description:
    'GRPO: EM reward, group-relative advantages over the G_wt with-tool rollouts, PPO clip, beta = 0',
  source: 'Shao et al. 2024 (arXiv 2402.03300); the AKBE paper §4.3 base method',
  akbeTargets: false,
  needsNoTool: false,
  options: {},
  rewards: outcomeRewards,
  losses: (cfg) => [{ name: LossName.GRPO, options: { clipEps: cfg.clipEps } }],
});
