/**
 * One learner step's train request, the one shape it has past the learner: what the orchestrator
 * sends on `svc.train` (src/actors/orchestrator/run-steps.ts), what the trainer service receives
 * (its TrainCall adds only the signature), what the audit rebuilds from the log alone
 * (src/audit/rebuilt-request.ts) and what the training loop trains (src/train/train-loop.ts). The
 * learner machine's TrainRequest (src/machines/learner.ts) is its first part, the batch and loss
 * terms; the run's hyperparameters complete it. Its bytes are digested by src/events/train-digest.ts.
 */
import type { TrainBatch } from './batch.js';
import type { LossTerm } from './losses.js';

export interface TrainStepRequest {
  step: number;
  /** The version the step trains from (it publishes policyVersion + 1). */
  policyVersion: number;
  batch: TrainBatch;
  losses: LossTerm[];
  lr: number;
  /** PPO epochs over the batch. */
  epochs: number;
  /** Rows of every update's graph (>= the largest mini-batch; rl/mini-batch.ts rowsPerUpdate). */
  rowsPerUpdate: number;
  padId: number;
}
