/**
 * What the trainer service speaks on `svc.train`: the learner's request for one step and the
 * reply naming the published version. service-requests.ts validates the request at the edge.
 */
import type { TrainRequestSignature } from '../../../events/train-signature.js';
import type { TrainStepRequest } from '../../../rl/train-request.js';
import type { PublishedCheckpoint } from '../../checkpoints/checkpoints.js';

/** The step's train request (src/rl/train-request.ts), signed. */
export interface TrainCall extends TrainStepRequest {
  /** The orchestrator's signature over run, step, version and the request digest (train-signature.ts). */
  signature?: TrainRequestSignature;
}

export interface TrainReply {
  version: number;
  /** DPO steps: each batch row's sequence logprob under the reference v0 (0 off pairs). */
  refLogp?: number[];
  metrics: Record<string, number>;
  published: PublishedCheckpoint;
  /** trainRequestDigest of the request as this trainer received it (before it fills any array). */
  requestSha256?: string;
}
