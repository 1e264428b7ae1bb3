/**
 * Batch assembly for the trainer: a step's question groups -> padded token rows, loss masks, old
 * logprobs, per-row advantages and loss weights, and the split into mini-batches (each sliced out
 * for the trainer by mini-batch.ts). Which rows a question gives is the algorithm's row kinds'
 * (src/rl/row-kinds.ts): its with-tool rollouts always, then each kind's rows.
 *
 * Layout (B rows, T = longest row or `padTo`):
 *   inputIds    [B, T]    prompt ++ response, right-padded with `padId`
 *   lossMask    [B, T-1]  lossMask[b, t] = 1 iff inputIds[b, t+1] is a token the policy generated;
 *                         0 when it is a prompt, observation (<information> block) or padding token.
 *                         Position t holds the prediction of token t+1 from the prefix inputIds[b, ..t].
 *   oldLogprobs [B, T-1]  log pi_old(inputIds[b, t+1] | prefix) where lossMask = 1, else 0
 *   advantages  [B]       GRPO advantage of the row (0 on rows that are AKBE-only)
 *   pgWeight    [B]       1 on rows in L_GRPO: every with-tool rollout of every question
 *   akbeWeight  [B]       the row's weight in L_AKBE, > 0 exactly on the target rows of a row kind
 *                         weighted in L_AKBE (akbe-target, offline-target); the trainer's L_AKBE is sum_b akbeWeight[b] sum_t lossMask[b, t] l[b, t]
 *                         over a mini-batch, so the weights carry the aggregation (akbeRowWeights):
 *                         'per-target' (the paper's form and the authors' code): 1 / (n_b * K),
 *                         n_b = the row's generated tokens, K = targets in the mini-batch, i.e. the
 *                         mean over targets of each target's own token-mean; 'pooled': 1 / (sum of the
 *                         mini-batch's target tokens), one token-mean over all target tokens.
 *   recomputeOld [B]      1 where oldLogprobs are not valid for the row's context (see below)
 *   proxLogprobs [B, T-1] optional: log pi_prox for the decoupled objective (see BatchArrays)
 *   dpoPairs              row kind dpo-pair only: (chosen = target row, rejected row, weight) per question
 *                         with a pair (src/rl/dpo.ts); weight = 1 / (pairs in the mini-batch), so
 *                         L_DPO is the mean over a mini-batch's pairs. Target rows are in the batch
 *                         as for akbe-target, with akbeWeight 0 (the DPO term replaces L_AKBE).
 *   offline targets       row kind offline-target (offline-akbe): the labels' own targets are not trained;
 *                         each question's target built once from a frozen checkpoint's rollouts
 *                         (src/rl/offline.ts) is its own row after the question's with-tool rows:
 *                         pgWeight 0, akbeWeight as for akbe-target, recomputeOld 1 (see below)
 *   refLogp [B]           dpo-pair only, filled by the trainer: each pair row's sequence logprob (sum
 *                         over its loss mask) under the frozen reference policy v0
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
import { type AkbeAggregation, DEFAULT_AKBE_AGGREGATION } from './losses.js';
import {
  type BatchQuestion,
  type BatchRow,
  getRowKind,
  type QuestionRow,
  questionRows,
  type RowKind,
  type RowSequence,
} from './row-kinds.js';

export type { BatchQuestion, BatchRow } from './row-kinds.js';

/** One DPO preference pair: batch row indices and its weight in its mini-batch's L_DPO. */
export interface DpoPair {
  chosen: number;
  rejected: number;
  weight: number;
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
  /**
   * [B, T-1] log pi_prox (the decoupled objective, src/gpu/losses.ts): the proximal policy (the
   * version before this update) on loss-mask positions, else 0. Absent = today's coupled loss;
   * oldLogprobs are then both the behaviour and the anchor. The trainer fills it (a forward pass
   * of version k before the step's first update, as recomputeOld); assembleBatch never does.
   */
  proxLogprobs?: Float32Array;
  /**
   * [B] dpo only: each row's sequence logprob under the frozen reference (v0), 0 off pairs. The
   * trainer fills it (a forward pass of v0 before the step's first update); assembleBatch never does.
   */
  refLogp?: Float32Array;
}

export interface TrainBatch extends BatchArrays {
  rowInfo: BatchRow[];
  /** Row indices of each mini-batch. */
  miniBatches: number[][];
  /** Sum of lossMask: generated tokens in the batch. */
  lossTokens: number;
  /** row kind dpo-pair only: the preference pairs, in question order (see the top of the file). */
  dpoPairs?: DpoPair[];
}

export interface AssembleOptions {
  /**
   * The row kinds beyond the with-tool rows (src/rl/row-kinds.ts; an algorithm's rowKindsOf):
   * 'akbe-target' (targets in L_AKBE), 'dpo-pair' (targets as the chosen side of DPO pairs),
   * 'offline-target' (the questions' offline targets in L_AKBE, none of the labels' own); none: GRPO.
   */
  rowKinds: readonly string[];
  /** M: questions per mini-batch. */
  miniBatchQuestions: number;
  /** How L_AKBE averages the target tokens of a mini-batch (see akbeWeight above). Default 'per-target'. */
  akbeAggregation?: AkbeAggregation;
  padId?: number;
  /** Fixed T (e.g. a graph's static length); a longer row throws. Default: the longest row. */
  padTo?: number;
}

/** Where each question's rows went: rows in batch order, each mini-batch's rows, the DPO pairs. */
interface PlacedRows {
  rows: QuestionRow[];
  miniBatches: number[][];
  pairs: Array<{ chosen: number; rejected: number; miniBatch: number }>;
}

export function assembleBatch(questions: readonly BatchQuestion[], opts: AssembleOptions): TrainBatch {
  const M = opts.miniBatchQuestions;
  if (!Number.isInteger(M) || M < 1)
    throw new RangeError(`assembleBatch: miniBatchQuestions must be an integer >= 1, got ${M}`);
  const kinds = opts.rowKinds.map((name) => getRowKind(name));
  const { rows, miniBatches, pairs } = placeRows(questions, kinds, M);
  const T = paddedLength(rows, opts.padTo);
  const arrays = rowArrays(rows, T, opts.padId ?? 0);
  // L_AKBE's row weights, per mini-batch (one optimizer update's loss); none when DPO uses the targets.
  const aggregation = opts.akbeAggregation ?? DEFAULT_AKBE_AGGREGATION;
  for (const mb of kinds.some((k) => k.akbeWeighted) ? miniBatches : []) {
    const targetTokens = mb.map((b) => (rows[b].target ? generatedTokens(rows[b].rollout) : 0));
    akbeRowWeights(targetTokens, aggregation).forEach((w, k) => {
      arrays.akbeWeight[mb[k]] = w;
    });
  }
  const { lossTokens, ...perRow } = arrays;
  // The key order of a batch before row kinds (JSON of a batch reads the same).
  return {
    ...perRow,
    rowInfo: rows.map((r) => r.info),
    miniBatches,
    lossTokens,
    ...(kinds.some((k) => k.pair) ? { dpoPairs: dpoPairWeights(pairs) } : {}),
  };
}

/** Every question's rows in order, M questions to a mini-batch, and the pairs the kinds make. */
function placeRows(questions: readonly BatchQuestion[], kinds: readonly RowKind[], M: number): PlacedRows {
  const placed: PlacedRows = { rows: [], miniBatches: [], pairs: [] };
  questions.forEach((q, qi) => {
    if (qi % M === 0) placed.miniBatches.push([]);
    const miniBatch = placed.miniBatches.length - 1;
    const first = placed.rows.length;
    const rows = questionRows(q, kinds);
    for (const row of rows) {
      placed.miniBatches[miniBatch].push(placed.rows.length);
      placed.rows.push(row);
    }
    for (const kind of kinds) {
      const pair = kind.pair?.(q, rows);
      if (pair)
        placed.pairs.push({ chosen: first + pair.chosen, rejected: first + pair.rejected, miniBatch });
    }
  });
  return placed;
}

/** T: `padTo`, or the longest row; a row longer than `padTo` throws. */
function paddedLength(rows: readonly QuestionRow[], padTo: number | undefined): number {
  const longest = rows.reduce((a, r) => Math.max(a, r.info.length), 1);
  const T = padTo ?? longest;
  if (longest > T) {
    const r = rows.find((x) => x.info.length > T)!;
    throw new RolloutShapeError(
      r.info.rolloutId,
      `row ${r.info.rolloutId} has ${r.info.length} tokens, more than padTo = ${T}`,
    );
  }
  return T;
}

/** The padded per-row arrays (akbeWeight all 0: the row kinds weigh it) and the batch's loss tokens. */
function rowArrays(
  rows: readonly QuestionRow[],
  T: number,
  padId: number,
): BatchArrays & { lossTokens: number } {
  const B = rows.length;
  const inputIds = new Int32Array(B * T).fill(padId);
  const lossMask = new Float32Array(B * (T - 1));
  const oldLogprobs = new Float32Array(B * (T - 1));
  const advantages = new Float32Array(B);
  const pgWeight = new Float32Array(B);
  const akbeWeight = new Float32Array(B);
  const recomputeOld = new Uint8Array(B);
  let lossTokens = 0;
  rows.forEach((row, b) => {
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
    lossTokens,
  };
}

/** L_DPO's weight of each pair: 1 / (pairs in its mini-batch), the mean over the mini-batch's pairs. */
function dpoPairWeights(
  pairs: ReadonlyArray<{ chosen: number; rejected: number; miniBatch: number }>,
): DpoPair[] {
  const per = new Map<number, number>();
  for (const p of pairs) per.set(p.miniBatch, (per.get(p.miniBatch) ?? 0) + 1);
  return pairs.map((p) => ({ chosen: p.chosen, rejected: p.rejected, weight: 1 / per.get(p.miniBatch)! }));
}

const generatedTokens = (r: RowSequence) => r.responseMask.reduce((a, m) => a + (m === 1 ? 1 : 0), 0);

/**
 * L_AKBE's weight of each row of one mini-batch, from the generated tokens of each target row
 * (0 for a row that is not a target): with loss tokens l[b, t],
 *   per-target: L = (1/K) sum_targets (1/n_b) sum_t l[b, t]   ->  w_b = 1 / (K n_b)
 *   pooled:     L = sum_targets sum_t l[b, t] / sum_targets n_b ->  w_b = 1 / sum n
 * K counts the targets with at least one generated token; a mini-batch without any gets all 0
 * (L_AKBE = 0, as the graph's masked means give for an empty mask).
 */
export function akbeRowWeights(targetTokens: readonly number[], aggregation: AkbeAggregation): number[] {
  const targets = targetTokens.filter((n) => n > 0);
  const total = targets.reduce((a, n) => a + n, 0);
  return targetTokens.map((n) => {
    if (n <= 0) return 0;
    return aggregation === 'pooled' ? 1 / total : 1 / (targets.length * n);
  });
}
