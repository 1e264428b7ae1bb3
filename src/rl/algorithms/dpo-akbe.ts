/**
 * DPO-AKBE, the AKBE paper's appendix variant ("AKBE with DPO-based integration"): the on-policy
 * boundary targets of `akbe` become the chosen side of preference pairs whose rejected side is the
 * question's with-tool rollout with the most tool calls among the incorrect or inefficient ones
 * (src/rl/dpo.ts), and L_AKBE is replaced by the DPO loss (Rafailov et al. 2023, "Direct Preference
 * Optimization", arXiv 2305.18290, eq. 7) against a frozen reference, the run's base policy v0:
 *
 *   L      = L_GRPO + lambda * L_DPO                    (the same lambda as akbe: the appendix
 *                                                        applies lambda = 0.05 to both)
 *   L_DPO  = mean over pairs of -log sigmoid(beta [(s(y_w) - s_ref(y_w)) - (s(y_l) - s_ref(y_l))])
 *   s(y)   = sum of log pi_theta over y's generated tokens (observations masked out)
 *
 * The paper gives no beta: 0.1, DPO's usual value (`algoOptions: { beta }`). The chosen sequence is
 * scored under the target's context (`targetContext`: the with-tool prompt by default, so both
 * sides of a pair share the prompt x as DPO assumes).
 */
import { DEFAULT_DPO_BETA, effectiveLambda, LossName, type LossTerm } from '../losses.js';
import { algorithmOptions, getAlgorithm, outcomeRewards, registerAlgorithm } from './algorithm.js';

registerAlgorithm({
  name: 'dpo-akbe',
  description: 'GRPO + lambda * DPO(chosen = AKBE target, rejected = most tool calls) vs the frozen v0',
  source: 'the AKBE paper appendix (DPO-based variant); Rafailov et al. 2023, arXiv 2305.18290 eq. 7',
  akbeTargets: true,
  dpoPairs: true,
  needsNoTool: true,
  rowKinds: ['dpo-pair'],
  options: { beta: DEFAULT_DPO_BETA },
  validateOptions: (o) => {
    if (!(o.beta > 0)) throw new RangeError(`beta must be > 0, got ${o.beta}`);
  },
  rewards: outcomeRewards,
  losses: (cfg): LossTerm[] => {
    const { beta } = algorithmOptions(getAlgorithm('dpo-akbe'), cfg.algoOptions);
    return [
      { name: LossName.GRPO, options: { clipEps: cfg.clipEps } },
      { name: LossName.DPO, options: { lambda: effectiveLambda(cfg), beta } },
    ];
  },
});
