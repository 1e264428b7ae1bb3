/**
 * beta-GRPO: Wu et al. 2025, "Search Wisely: Mitigating Sub-optimal Agentic Searches By Reducing
 * Uncertainty" (arXiv 2505.17281, EMNLP 2025, §4). The confidence of a search decision is the
 * minimum probability of the tokens that generated it; a rollout keeps its outcome reward only if
 * every search decision's confidence is at least the threshold beta, else its reward is 0:
 *
 *   R = r_phi * 1[ min over search calls s of min_{t in s} p(t) >= beta ]
 *
 * A rollout without a search keeps r_phi (no search decision to doubt).
 *
 * Token span of a call (our departure, precisely): the paper takes the tokens of the search call
 * itself. The learner sees token ids, logprobs and the mask, not which token spells `<search>`
 * (that alignment lives in the text environment), so a call's span here is the whole generated
 * turn that ended in it: the generated run of the response right before an observation. That
 * includes the turn's reasoning tokens, so the confidence is at most the paper's (a stricter
 * gate). p(t) is the temperature-1 policy probability the sampler recorded.
 *
 * Option: beta = 0.4 (the threshold; tune per policy: it gates on absolute probabilities).
 */
import { LossName } from '../losses.js';
import type { RolloutResult } from '../types.js';
import { registerAlgorithm } from './algorithm.js';

/**
 * The confidence of each search call of a rollout: the minimum token probability of each
 * generated run that is followed by an observation (mask 0) run, in order.
 */
export function searchCallConfidences(r: Pick<RolloutResult, 'responseLogprobs' | 'responseMask'>): number[] {
  const out: number[] = [];
  let runMin = Number.POSITIVE_INFINITY;
  let inRun = false;
  for (let j = 0; j < r.responseMask.length; j++) {
    if (r.responseMask[j] === 1) {
      runMin = Math.min(runMin, r.responseLogprobs[j]);
      inRun = true;
    } else if (inRun) {
      out.push(Math.exp(runMin)); // the run ended in a call: the observation follows it
      runMin = Number.POSITIVE_INFINITY;
      inRun = false;
    }
  }
  return out;
}

registerAlgorithm({
  name: 'beta-grpo',
  description: 'beta-GRPO: the EM reward only when every search decision had confidence >= beta',
  source: 'Wu et al. 2025, arXiv 2505.17281 §4 (beta-GRPO); docs/algorithms.md',
  akbeTargets: false,
  needsNoTool: false,
  options: { beta: 0.4 },
  validateOptions: (o) => {
    if (!(o.beta >= 0 && o.beta <= 1)) throw new RangeError(`beta must be in [0, 1], got ${o.beta}`);
  },
  rewards: (withTool, o) =>
    withTool.map((r) => (searchCallConfidences(r).every((p) => p >= o.beta) ? r.reward : 0)),
  losses: (cfg) => [{ name: LossName.GRPO, options: { clipEps: cfg.clipEps } }],
});
