/**
 * The audit of dpo-akbe's pairs (src/rl/dpo.ts, src/rl/batch.ts): learner.step.batch.dpoPairs
 * against the pairs the learner's pure step re-derives (chosen = the target row, rejected = the
 * most-tool-calls pick with its seeded tie-break, weight 1 / pairs per mini-batch), and the
 * reference logprobs the trainer computed: recorded for both rows of every pair, and, at policy
 * version 0 (where the reference v0 is the policy that sampled the rollouts), equal to the sum of
 * the rollout's recorded logprobs for rows scored in their own context. Later versions' reference
 * logprobs need the model (v0's checkpoint, whose sha256 run.started records) to recompute.
 */
import type { TrainedBatch } from '../events/payloads/learner.js';
import type { TrainBatch } from '../rl/batch.js';
import type { RolloutResult } from '../rl/types.js';

/** Float32 decode vs training-graph logprobs: allowed gap per summed token (plus a floor). */
export const REF_TOLERANCE_PER_TOKEN = 1e-4;

export function checkDpoPairs(
  check: (field: string, recorded: unknown, recomputed: unknown) => boolean,
  recorded: TrainedBatch,
  b: TrainBatch,
  version: number,
  results: ReadonlyMap<string, RolloutResult>,
): void {
  const want = (b.dpoPairs ?? []).map(({ chosen, rejected, weight }) => ({ chosen, rejected, weight }));
  const got = (recorded.dpoPairs ?? []).map(({ chosen, rejected, weight }) => ({ chosen, rejected, weight }));
  if (!check('batch.dpoPairs', got, want)) return;
  (recorded.dpoPairs ?? []).forEach((p, i) => {
    for (const side of ['chosen', 'rejected'] as const) {
      const ref = side === 'chosen' ? p.refChosen : p.refRejected;
      const at = `batch.dpoPairs[${i}].ref${side === 'chosen' ? 'Chosen' : 'Rejected'}`;
      if (ref === undefined || !Number.isFinite(ref)) {
        check(at, ref ?? null, 'the reference logprob of the row');
        continue;
      }
      const row = p[side];
      if (version !== 0 || b.recomputeOld[row] === 1) continue;
      const r = results.get(b.rowInfo[row].rolloutId);
      if (!r) continue;
      let sum = 0;
      let n = 0;
      r.responseLogprobs.forEach((lp, j) => {
        if (r.responseMask[j] === 1) {
          sum += lp;
          n++;
        }
      });
      if (Math.abs(ref - sum) > REF_TOLERANCE_PER_TOKEN * (n + 10))
        check(at, ref, `${sum} (v0 sampled the row: the reference is its own logprobs)`);
    }
  });
}
