/**
 * GRPO + lambda * L_AKBE (the AKBE paper, §4.3 eq. for L and L_AKBE; appendix A for the clipped
 * form): the GRPO reward and loss unchanged, plus the cross-entropy of each labelled question's
 * target (at most one per question). The target's context is the config's `targetContext`
 * (`with-tool`: a no-tool target re-conditioned on the with-tool prompt; `own`: its no-tool prompt),
 * its aggregation `akbeAggregation`, its form `akbeLossForm`, its weight `lambda` (or 'auto').
 */
import { effectiveLambda, LossName, type LossTerm } from '../losses.js';
import { outcomeRewards, registerAlgorithm } from './algorithm.js';

registerAlgorithm({
  name: 'akbe',
  description: 'GRPO + lambda * L_AKBE over on-policy boundary targets (both target contexts)',
  source: 'the AKBE paper (../shared/reference/akbe-paper.txt) §4.2-4.3, appendices A-B',
  akbeTargets: true,
  needsNoTool: true,
  rowKinds: ['akbe-target'],
  options: {},
  rewards: outcomeRewards,
  losses: (cfg): LossTerm[] => {
    const lambda = effectiveLambda(cfg);
    return [
      { name: LossName.GRPO, options: { clipEps: cfg.clipEps } },
      cfg.akbeLossForm === 'nll'
        ? { name: LossName.AKBE_NLL, options: { lambda } }
        : { name: LossName.AKBE_CLIPPED, options: { lambda, clipEps: cfg.clipEps } },
    ];
  },
});
