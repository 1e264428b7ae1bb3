import type { TrainCall } from '../../src/actors/services/trainer/protocol.js';
import { lossTermsFor } from '../../src/rl/algorithms/index.js';
import type { TrainBatch } from '../../src/rl/batch.js';

/**
 * One GRPO row of 6 tokens with a non-zero advantage, so an update moves the weights (the tiny
 * policy's vocabulary holds ids 5..11). A fresh copy per call: callers may change it.
 */
export function oneRowBatch(ids: readonly number[] = [5, 6, 7, 8, 9, 10]): TrainBatch {
  const info = { questionId: 'q0', rolloutId: 'q0.wt0', path: 'with-tool', context: 'with-tool' } as const;
  return {
    rows: 1,
    T: 6,
    inputIds: Int32Array.from(ids),
    lossMask: Float32Array.from([0, 1, 1, 1, 1]),
    oldLogprobs: Float32Array.from([0, -3, -3, -3, -3]),
    advantages: Float32Array.from([1]),
    pgWeight: Float32Array.from([1]),
    akbeWeight: Float32Array.from([0]),
    recomputeOld: Uint8Array.from([0]),
    rowInfo: [{ ...info, promptLength: 1, length: 6 }],
    miniBatches: [[0]],
    lossTokens: 4,
  };
}

/** A GRPO train request for step `step` from v0 on oneRowBatch(ids): lr 0.05, one epoch, one update. */
export function oneRowTrainCall(step = 0, ids?: readonly number[]): TrainCall {
  return {
    step,
    policyVersion: 0,
    batch: oneRowBatch(ids),
    losses: lossTermsFor({ algo: 'grpo', clipEps: 0.2, akbeLossForm: 'nll', lambda: 0 }),
    lr: 0.05,
    epochs: 1,
    rowsPerUpdate: 1,
    padId: 0,
  };
}
