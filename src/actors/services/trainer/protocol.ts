/**
 * What the trainer service speaks on `svc.train`: the learner's request for one step and the
 * reply naming the published version. service-requests.ts validates the request at the edge.
 */
import type { TrainBatch } from '../../../rl/batch.js';
import type { LossTerm } from '../../../rl/losses.js';
import type { PublishedCheckpoint } from '../../checkpoints/checkpoints.js';

export interface TrainCall {
  step: number;
  policyVersion: number;
  batch: TrainBatch;
  losses: LossTerm[];
  lr: number;
  epochs: number;
  /** Rows of every update's graph (>= the largest mini-batch). */
  rowsPerUpdate: number;
  padId: number;
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
