import type { PolicyWorkerInit } from '../../gpu/policy-protocol.js';
import { lossTermsFor } from '../../rl/algorithms/index.js';
import type { TrainConfig } from '../../rl/config.js';
import { trainerPlan } from '../../rl/losses.js';

/**
 * The trainer options a run's config decides (the train graph's shape and fixed bounds): what the
 * trainer role builds its policy with, and what `akbe replay --verify-training` re-trains with.
 * A DPO algorithm's graph has the pair inputs and the reference's sequence logprobs;
 * asynchronous runs train stale rows with the decoupled objective (its graph takes pi_prox).
 * The dual clip and the log-ratio clamp change the graph (null omits them); their bounds and
 * L_GRPO's aggregation are fixed for the run (config.dualClip, logRatioClamp, lossAgg).
 */
export function trainerOptionsOf(train: TrainConfig): NonNullable<PolicyWorkerInit['trainer']> {
  return {
    akbeLoss: train.akbeLossForm,
    aggregation: train.lossAgg,
    dualClip: train.dualClip !== null,
    logRatioClamp: train.logRatioClamp !== null,
    hyper: {
      ...(train.dualClip !== null ? { dualClipC: train.dualClip } : {}),
      ...(train.logRatioClamp !== null ? { ratioClamp: train.logRatioClamp } : {}),
    },
    dpo: trainerPlan(lossTermsFor(train)).dpoGraph,
    ...(train.maxStaleness > 0 ? { decoupled: true } : {}),
  };
}
