/**
 * OTC-GRPO (OTC-PO instantiated on GRPO): Wang et al. 2025, "Acting Less is Reasoning More!
 * Teaching Model to Act Efficiently" (arXiv 2504.14870, §3 "tool-integrated reward"). The reward
 * of a rollout with m tool calls (countedToolCalls) and outcome reward r_phi (EM with format) is
 *
 *   R = alpha * r_tool(m, n) * r_phi
 *   r_tool = 1                          if f(m, n) = 0 and n = 0
 *          = cos(m pi / (2m + c))       if n = 0
 *          = sin(f(m, n) pi / (2n))     otherwise
 *   f(m, n) = 0 if m = n = 0;  m if n = 0;  2nm / (m + n) otherwise
 *
 * where n, the optimal number of calls, is the fewest calls among the group's correct rollouts
 * (OTC-GRPO's group estimate; the authors' code takes the minimum over rollouts with score > 0),
 * and c is the smoothing constant of the n = 0 branch. r_tool is 1 at m = n and falls as m moves
 * away from n (f maps m to 2n at m -> infinity, where sin(pi) = 0). A group without a correct
 * rollout has no n: every reward is 0, as r_phi is.
 *
 * Options: alpha = 1 (the reward's scale), c = 6 (the authors' released simulation uses
 * oct_smooth = 3 * 2; it is the decay of the n = 0 branch only).
 */
import { LossName } from '../losses.js';
import { countedToolCalls } from '../metrics.js';
import { registerAlgorithm } from './algorithm.js';

/** The tool-use factor r_tool(m, n) of OTC-GRPO. */
export function otcToolReward(m: number, n: number, c: number): number {
  // The paper's first case (m = n = 0: 1) is this one's value at m = 0, cos(0).
  if (n === 0) return Math.cos((m * Math.PI) / (2 * m + c));
  const f = (2 * n * m) / (m + n);
  return Math.sin((f * Math.PI) / (2 * n));
}

registerAlgorithm({
  name: 'otc-po',
  description: 'OTC-GRPO: EM reward times a tool-productivity factor, 1 at the group optimum of calls',
  source: 'Wang et al. 2025, arXiv 2504.14870 §3 (OTC-GRPO r_tool); docs/algorithms.md',
  akbeTargets: false,
  needsNoTool: false,
  options: { alpha: 1, c: 6 },
  validateOptions: (o) => {
    if (!(o.alpha > 0)) throw new RangeError(`alpha must be > 0, got ${o.alpha}`);
    if (!(o.c > 0)) throw new RangeError(`c must be > 0, got ${o.c}`);
  },
  rewards: (withTool, o) => {
    const calls = withTool.map((r) => countedToolCalls(r));
    const correct = withTool.map((r) => r.reward > 0);
    const n = Math.min(...calls.filter((_, i) => correct[i]));
    return withTool.map((r, i) => (correct[i] ? o.alpha * otcToolReward(calls[i], n, o.c) * r.reward : 0));
  },
  losses: (cfg) => [{ name: LossName.GRPO, options: { clipEps: cfg.clipEps } }],
});
