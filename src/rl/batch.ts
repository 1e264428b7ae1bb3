/**
 * Batch assembly for the trainer: a step's question groups -> padded token rows, loss masks, old
 * logprobs, per-row advantages and loss weights, and the split into mini-batches.
 *
 * Layout (B rows, T = longest row or `padTo`):
 *   inputIds    [B, T]    prompt ++ response, right-padded with `padId`
 *   lossMask    [B, T-1]  lossMask[b, t] = 1 iff inputIds[b, t+1] is a token the policy generated;
 *                         0 when it is a prompt, observation (<information> block) or padding token.
 *                         Position t holds the prediction of token t+1 from the prefix inputIds[b, ..t].
 *   oldLogprobs [B, T-1]  log pi_old(inputIds[b, t+1] | prefix) where lossMask = 1, else 0
 *   advantages  [B]       GRPO advantage of the row (0 on rows that are AKBE-only)
 *   pgWeight    [B]       1 on rows in L_GRPO: every with-tool rollout of every question
 *   akbeWeight  [B]       1 on the row of the question's AKBE target (algo 'akbe' only)
 *   recomputeOld [B]      1 where oldLogprobs are not valid for the row's context (see below)
 *
 * Field names follow the trainer's batch (src/gpu/trainer.ts). The target of a tool-dependent
 * question is one of its with-tool rollouts: that row gets akbeWeight 1 on top of its GRPO role
 * (no duplicate row). A no-tool target gets its own row:
 * - context `own`: its no-tool prompt ++ its response, with its recorded logprobs;
 * - context `with-tool`: re-conditioned, i.e. the question's with-tool prompt ++ its response
 *   tokens. The recorded logprobs were taken under the no-tool prompt, so they are not
 *   log pi_old of this sequence: oldLogprobs stay 0 and recomputeOld = 1. The `nll` form never
 *   reads them. The `clipped` form needs them: the trainer computes them with the step's policy
 *   version k (= pi_old, the version that produced every rollout of the step) in a forward pass
 *   before the step's first update, so its ratio starts at 1 exactly as for the other rows.
 *
 * Mini-batches hold the rows of M consecutive questions (all of a question's rows stay together),
 * questions in the order given.
 */
import { RolloutShapeError } from './errors.js';
import type { BoundaryLabel, QuestionGroup, RolloutPath, RolloutResult } from './types.js';

export interface BatchQuestion {
  group: QuestionGroup;
  label: BoundaryLabel | null;
  /** GRPO advantages of group.withTool, in the same order. */
  advantages: readonly number[];
}

export interface BatchRow {
  questionId: string;
  rolloutId: string;
  path: RolloutPath;
  /** The prompt the row's response is conditioned on. */
  context: RolloutPath;
  promptLength: number;
  /** Prompt + response tokens (before padding). */
  length: number;
}

/** The per-row arrays a batch and each of its mini-batches carry: `rows` rows of length T, row-major. */
export interface BatchArrays {
  rows: number;
  T: number;
  inputIds: Int32Array;
  lossMask: Float32Array;
  oldLogprobs: Float32Array;
  advantages: Float32Array;
  pgWeight: Float32Array;
  akbeWeight: Float32Array;
  recomputeOld: Uint8Array;
}

export interface TrainBatch extends BatchArrays {
  rowInfo: BatchRow[];
  /** Row indices of each mini-batch. */
  miniBatches: number[][];
  /** Sum of lossMask: generated tokens in the batch. */
  lossTokens: number;
}

export interface AssembleOptions {
  algo: 'grpo' | 'akbe';
  /** M: questions per mini-batch. */
  miniBatchQuestions: number;
  padId?: number;
  /** Fixed T (e.g. a graph's static length); a longer row throws. Default: the longest row. */
  padTo?: number;
}

interface PendingRow {
  info: BatchRow;
  prompt: readonly number[];
  rollout: RolloutResult;
  /** Use the rollout's recorded logprobs as pi_old. */
  oldValid: boolean;
  advantage: number;
  grpo: boolean;
  akbe: boolean;
}

function checkShape(r: RolloutResult): void {
  const n = r.responseTokens.length;
  if (r.responseLogprobs.length !== n || r.responseMask.length !== n) {
    throw new RolloutShapeError(
      r.rolloutId,
      `rollout ${r.rolloutId}: ${n} response tokens but ${r.responseLogprobs.length} logprobs and ${r.responseMask.length} mask entries`,
    );
  }
}

function pendingRows(q: BatchQuestion, algo: AssembleOptions['algo']): PendingRow[] {
  const { group, label } = q;
  if (q.advantages.length !== group.withTool.length) {
    throw new RolloutShapeError(
      undefined,
      `question ${group.questionId}: ${q.advantages.length} advantages for ${group.withTool.length} with-tool rollouts`,
    );
  }
  const target = algo === 'akbe' ? (label?.target ?? null) : null;
  const rows: PendingRow[] = group.withTool.map((r, i) => {
    checkShape(r);
    return {
      info: {
        questionId: group.questionId,
        rolloutId: r.rolloutId,
        path: r.path,
        context: 'with-tool',
        promptLength: r.promptTokens.length,
        length: r.promptTokens.length + r.responseTokens.length,
      },
      prompt: r.promptTokens,
      rollout: r,
      oldValid: true,
      advantage: q.advantages[i],
      grpo: true,
      akbe: target?.rolloutId === r.rolloutId,
    };
  });
  if (target && target.path === 'no-tool') {
    const r = group.noTool.find((x) => x.rolloutId === target.rolloutId);
    if (!r)
      throw new RolloutShapeError(
        target.rolloutId,
        `question ${group.questionId}: target ${target.rolloutId} is not among its no-tool rollouts`,
      );
    checkShape(r);
    const prompt = target.context === 'with-tool' ? group.withToolPrompt : r.promptTokens;
    rows.push({
      info: {
        questionId: group.questionId,
        rolloutId: r.rolloutId,
        path: 'no-tool',
        context: target.context,
        promptLength: prompt.length,
        length: prompt.length + r.responseTokens.length,
      },
      prompt,
      rollout: r,
      oldValid: target.context === 'no-tool',
      advantage: 0,
      grpo: false,
      akbe: true,
    });
  } else if (target && !rows.some((row) => row.akbe)) {
    throw new RolloutShapeError(
      target.rolloutId,
      `question ${group.questionId}: target ${target.rolloutId} is not among its with-tool rollouts`,
    );
  }
  return rows;
}

export function assembleBatch(questions: readonly BatchQuestion[], opts: AssembleOptions): TrainBatch {
  const M = opts.miniBatchQuestions;
  if (!Number.isInteger(M) || M < 1)
    throw new RangeError(`assembleBatch: miniBatchQuestions must be an integer >= 1, got ${M}`);
  const pending: PendingRow[] = [];
  const miniBatches: number[][] = [];
  questions.forEach((q, qi) => {
    if (qi % M === 0) miniBatches.push([]);
    for (const row of pendingRows(q, opts.algo)) {
      miniBatches[miniBatches.length - 1].push(pending.length);
      pending.push(row);
    }
  });
  const longest = pending.reduce((a, r) => Math.max(a, r.info.length), 1);
  const T = opts.padTo ?? longest;
  if (longest > T) {
    const r = pending.find((x) => x.info.length > T)!;
    throw new RolloutShapeError(
      r.info.rolloutId,
      `row ${r.info.rolloutId} has ${r.info.length} tokens, more than padTo = ${T}`,
    );
  }
  const B = pending.length;
  const inputIds = new Int32Array(B * T).fill(opts.padId ?? 0);
  const lossMask = new Float32Array(B * (T - 1));
  const oldLogprobs = new Float32Array(B * (T - 1));
  const advantages = new Float32Array(B);
  const pgWeight = new Float32Array(B);
  const akbeWeight = new Float32Array(B);
  const recomputeOld = new Uint8Array(B);
  let lossTokens = 0;
  pending.forEach((row, b) => {
    const { prompt, rollout } = row;
    // The first token has no prediction position: a response needs at least one prompt token.
    if (prompt.length === 0)
      throw new RolloutShapeError(row.info.rolloutId, `row ${row.info.rolloutId} has an empty prompt`);
    inputIds.set(prompt, b * T);
    inputIds.set(rollout.responseTokens, b * T + prompt.length);
    // Response token j sits at position P + j and is predicted at mask position P + j - 1.
    const base = b * (T - 1) + prompt.length - 1;
    for (let j = 0; j < rollout.responseTokens.length; j++) {
      if (rollout.responseMask[j] !== 1) continue;
      lossMask[base + j] = 1;
      if (row.oldValid) oldLogprobs[base + j] = rollout.responseLogprobs[j];
      lossTokens += 1;
    }
    advantages[b] = row.advantage;
    pgWeight[b] = row.grpo ? 1 : 0;
    akbeWeight[b] = row.akbe ? 1 : 0;
    recomputeOld[b] = row.oldValid ? 0 : 1;
  });
  return {
    rows: B,
    T,
    inputIds,
    lossMask,
    oldLogprobs,
    advantages,
    pgWeight,
    akbeWeight,
    recomputeOld,
    rowInfo: pending.map((r) => r.info),
    miniBatches,
    lossTokens,
  };
}

/** One mini-batch as the trainer takes it: flat row-major arrays of `rows` rows of length T. */
export interface MiniBatch extends BatchArrays {
  /** Rows past the real ones: padding with every mask and weight 0 (for a fixed-B graph). */
  paddingRows: number;
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
  rowIds.forEach((src, dst) => {
    out.inputIds.set(batch.inputIds.subarray(src * T, (src + 1) * T), dst * T);
    out.lossMask.set(batch.lossMask.subarray(src * (T - 1), (src + 1) * (T - 1)), dst * (T - 1));
    out.oldLogprobs.set(batch.oldLogprobs.subarray(src * (T - 1), (src + 1) * (T - 1)), dst * (T - 1));
    out.advantages[dst] = batch.advantages[src];
    out.pgWeight[dst] = batch.pgWeight[src];
    out.akbeWeight[dst] = batch.akbeWeight[src];
    out.recomputeOld[dst] = batch.recomputeOld[src];
  });
  return out;
}
