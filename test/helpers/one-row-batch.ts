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
