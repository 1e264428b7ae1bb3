/**
 * The smallest train request the digest and signature accept (one 2-token row), for step `step`
 * from version `step`. A fresh object per call: callers edit their copy. Its digest at step 0 is a
 * known answer in test/train-digest.test.ts.
 */
export function tinyTrainRequest(step = 0) {
  return {
    step,
    policyVersion: step,
    lr: 0.001,
    epochs: 1,
    rowsPerUpdate: 1,
    padId: 0,
    losses: [{ name: 'grpo', options: { clipEps: 0.2 } }],
    batch: { rows: 1, T: 2, lossTokens: 1, rowInfo: [], miniBatches: [[0]], inputIds: Int32Array.of(5, 7) },
  };
}
