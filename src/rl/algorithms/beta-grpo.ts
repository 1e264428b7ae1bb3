/**
 * beta-GRPO: Wu et al. 2025, "Search Wisely: Mitigating Sub-optimal Agentic Searches By Reducing
 * Uncertainty" (arXiv 2505.17281, EMNLP 2025, §4). The confidence of a search decision is the
 * minimum probability of the tokens of its generated search query; a rollout keeps its outcome
 * reward only if every search decision's confidence is at least the threshold beta, else its
 * reward is 0:
 *
 *   R = r_phi * 1[ min over search calls s of min_{t in q(s)} p(t) >= beta ]
 *
 * A rollout without a search keeps r_phi (no search decision to doubt).
 *
 * Which tokens q(s) are, exactly: `RolloutResult.toolCallSpans`, which the rollout machine records
 * for every turn that ended in a tool call (executed, or refused by the tool-call limit): the
 * tokens of the turn whose text overlaps the stripped query between `<search>` and `</search>`
 * (src/rl/format.ts toolCallChars; src/text/token-span.ts maps characters to tokens by prefix
 * decodes, so a token straddling a tag and the query counts). The turn's reasoning and the tags
 * are not in it. An empty query (a format failure, so reward 0 anyway) takes the call's own
 * tokens, tags included. p(t) is the temperature-1 policy probability the sampler recorded.
 *
 * Logs written before rollout.completed v3 carry the span of the rule they were trained with (the
 * whole generated turn that ended in the call), derived by the v2 -> v3 upcaster, so their audit
 * re-derives the rewards they were trained on.
 *
 * Option: beta = 0.4 (the threshold; tune per policy: it gates on absolute probabilities).
 */
import { LossName } from '../losses.js';
import type { RolloutResult } from '../types.js';
import { registerAlgorithm } from './algorithm.js';

/**
 * The confidence of each search call of a rollout, in order: exp of the minimum logprob over the
 * call's recorded token span (its query).
 */
export function searchCallConfidences(
  r: Pick<RolloutResult, 'responseLogprobs' | 'toolCallSpans'>,
): number[] {
  return r.toolCallSpans.map(([start, end]) => {
    let min = Number.POSITIVE_INFINITY;
    for (let j = start; j < end; j++) min = Math.min(min, r.responseLogprobs[j]);
    return Math.exp(min);
  });
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
