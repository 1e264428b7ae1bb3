/**
 * One mini-batch of a step's batch (src/rl/batch.ts) as the trainer's graph takes it: its rows
 * copied out in order, padded to a fixed row count when the graph's batch size is static, and
 * for DPO the pair matrix of the pairs whose rows both fall in it.
 */
import type { BatchArrays, TrainBatch } from './batch.js';

/** One mini-batch as the trainer takes it: flat row-major arrays of `rows` rows of length T. */
export interface MiniBatch extends BatchArrays {
  /** Rows past the real ones: padding with every mask and weight 0 (for a fixed-B graph). */
  paddingRows: number;
  /**
   * dpo only, the graph's pair inputs: [rows, rows] row p = pair slot p (+1 at its chosen row, -1 at
   * its rejected row, all 0 for an unused slot), and each slot's weight [rows] (0 when unused).
   */
  dpoPairMatrix?: Float32Array;
  dpoWeight?: Float32Array;
}

/**
 * Rows of every update's graph (the train request's `rowsPerUpdate`): the largest mini-batch
 * holds M questions' G_wt with-tool rows and at most one target row each, M * (G_wt + 1).
 */
export function rowsPerUpdate(miniBatchQuestions: number, gWithTool: number): number {
  return miniBatchQuestions * (gWithTool + 1);
}

/**
 * The arrays of mini-batch `index`, optionally padded with empty rows up to `padRowsTo` (a
 * training graph with a static batch size; at most M * (G_wt + 1) rows are ever needed). Empty rows
 * contribute nothing: their loss mask and weights are 0.
 */
export function sliceMiniBatch(
  batch: TrainBatch,
  index: number,
  opts: { padRowsTo?: number; padId?: number } = {},
): MiniBatch {
  const rowIds = batch.miniBatches[index];
  if (!rowIds)
    throw new RangeError(
      `sliceMiniBatch: no mini-batch ${index} (the batch has ${batch.miniBatches.length})`,
    );
  const rows = Math.max(rowIds.length, opts.padRowsTo ?? 0);
  if (opts.padRowsTo !== undefined && opts.padRowsTo < rowIds.length) {
    throw new RangeError(
      `sliceMiniBatch: mini-batch ${index} has ${rowIds.length} rows, more than padRowsTo = ${opts.padRowsTo}`,
    );
  }
  const { T } = batch;
  const out: MiniBatch = {
    rows,
    T,
    inputIds: new Int32Array(rows * T).fill(opts.padId ?? 0),
    lossMask: new Float32Array(rows * (T - 1)),
    oldLogprobs: new Float32Array(rows * (T - 1)),
    advantages: new Float32Array(rows),
    pgWeight: new Float32Array(rows),
    akbeWeight: new Float32Array(rows),
    recomputeOld: new Uint8Array(rows),
    paddingRows: rows - rowIds.length,
  };
  const prox = batch.proxLogprobs;
  if (prox) out.proxLogprobs = new Float32Array(rows * (T - 1));
  rowIds.forEach((src, dst) => {
    out.inputIds.set(batch.inputIds.subarray(src * T, (src + 1) * T), dst * T);
    out.lossMask.set(batch.lossMask.subarray(src * (T - 1), (src + 1) * (T - 1)), dst * (T - 1));
    out.oldLogprobs.set(batch.oldLogprobs.subarray(src * (T - 1), (src + 1) * (T - 1)), dst * (T - 1));
    out.advantages[dst] = batch.advantages[src];
    out.pgWeight[dst] = batch.pgWeight[src];
    out.akbeWeight[dst] = batch.akbeWeight[src];
    out.recomputeOld[dst] = batch.recomputeOld[src];
    if (prox) out.proxLogprobs!.set(prox.subarray(src * (T - 1), (src + 1) * (T - 1)), dst * (T - 1));
  });
  if (batch.dpoPairs) {
    const local = new Map(rowIds.map((src, dst) => [src, dst]));
    out.dpoPairMatrix = new Float32Array(rows * rows);
    out.dpoWeight = new Float32Array(rows);
    out.refLogp = new Float32Array(rows);
    let slot = 0;
    for (const p of batch.dpoPairs) {
      const c = local.get(p.chosen);
      const r = local.get(p.rejected);
      if (c === undefined || r === undefined) continue; // another mini-batch's pair
      out.dpoPairMatrix[slot * rows + c] = 1;
      out.dpoPairMatrix[slot * rows + r] = -1;
      out.dpoWeight[slot] = p.weight;
      slot++;
    }
    const ref = batch.refLogp;
    if (ref) out.refLogp.set(rowIds.map((src) => ref[src]));
  }
  return out;
}
