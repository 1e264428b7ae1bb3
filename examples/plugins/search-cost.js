/**
 * An example akbe plugin: GRPO whose reward charges every executed search a cost, so the policy
 * learns to search only when the answer is worth it (the idea of OTC-PO, arXiv 2504.14870, in its
 * simplest linear form). Name it in a config and train:
 *
 *   plugins: [./examples/plugins/search-cost.js]
 *   algo: grpo-search-cost
 *   algoOptions: { cost: 0.1 }
 *
 * A plugin is an ES module whose default export receives akbe's registration API (docs/api.md);
 * run.started records this file's sha256, and workers and `akbe replay` refuse it if it changed.
 */
export default function register(akbe) {
  akbe.registerAlgorithm({
    name: 'grpo-search-cost',
    description: 'GRPO on the outcome reward minus cost x searches executed (plugin example)',
    source: 'examples/plugins/search-cost.js; a linear form of OTC-PO (arXiv 2504.14870)',
    akbeTargets: false,
    needsNoTool: false,
    options: { cost: 0.1 },
    validateOptions(opts) {
      if (!(opts.cost >= 0 && opts.cost <= 1)) throw new RangeError('algoOptions.cost must lie in [0, 1]');
    },
    // Pure and deterministic: the audit recomputes these from the logged rollouts.
    rewards: (withTool, opts) => withTool.map((r) => r.reward - opts.cost * r.toolCalls),
    losses: (cfg) => [{ name: akbe.LossName.GRPO, options: { clipEps: cfg.clipEps } }],
  });
}
