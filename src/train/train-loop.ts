/**
 * One learner step's training, top to bottom: the request's batch and loss terms in, the updated
 * weights (held by the engine) and the step's averaged metrics out. No NATS, no files: the trainer
 * service (src/actors/services/trainer) does the I/O around it (the version to start from, the
 * checkpoint after), and `--verify-training` replays a recorded step through it.
 *
 * Phases:
 *   1. plan         what the loss terms ask for (src/rl/losses.ts trainerPlan; no name compared here)
 *   2. prepare      arrays filled with version k before any update: DPO's reference logprobs (v0),
 *                   the re-conditioned rows' pi_old (clipped AKBE), pi_prox of every row (decoupled)
 *   3. updates      for each epoch, for each mini-batch: slice (padded to rowsPerUpdate rows, so one
 *                   graph shape serves the run), one optimizer update, then `onUpdate`
 *   4. metrics      the mean of each loss metric over the updates, updates, time, tokens per second
 */
import type { TrainRequest as UpdateRequest } from '../gpu/policy-runtime.js';
import type { TrainHyper, TrainMetrics } from '../gpu/trainer.js';
import type { TrainBatch } from '../rl/batch.js';
import { trainerPlan } from '../rl/losses.js';
import { sliceMiniBatch } from '../rl/mini-batch.js';
import type { TrainStepRequest } from '../rl/train-request.js';

/** What runs the updates: a policy whose weights (and AdamW state) the loop advances in place. */
export interface TrainEngine {
  /** log p(x_t | x_<t) for t = 1..L-1 of each sequence, under the current weights. */
  logprobs(sequences: number[][]): Promise<number[][]>;
  /** One optimizer update on a mini-batch (`transfer`: its arrays may be moved to a worker). */
  trainStep(req: UpdateRequest, opts?: { transfer?: boolean }): Promise<TrainMetrics>;
}

export interface TrainLoopOptions {
  /** DPO's frozen reference (v0), asked for only when a loss term needs its logprobs. */
  reference?: () => Promise<Pick<TrainEngine, 'logprobs'>>;
  /** The decoupled objective (maxStaleness >= 1): pi_prox / pi_behav above the cap weighs 0. */
  decoupled?: { behaviourWeightCap: number };
  /** Called after each update with how many are done of how many (progress, test hooks). */
  onUpdate?: (done: number, total: number) => void | Promise<void>;
}

export interface TrainLoopResult {
  /** Means over the updates of MEAN_KEYS, and updates, trainSeconds, tokensPerSecond. */
  metrics: Record<string, number>;
  /** Filled when a loss term needed the reference: each row's sequence logprob under v0. */
  refLogp?: Float32Array;
}

/** The update metrics a step reports as their mean over its updates (learner.step trainMetrics). */
const MEAN_KEYS = [
  'loss',
  'pgLoss',
  'akbeLoss',
  'dpoLoss',
  'gradNorm',
  'clipFrac',
  'approxKl',
  'entropy',
] as const;
/** Reported only when an update measured it (a graph without the term has no such output). */
const OPTIONAL_KEYS: ReadonlySet<string> = new Set(['dpoLoss']);

/** Trains `input` on `engine` (see the top of the file); fills the batch's refLogp / proxLogprobs. */
export async function trainLoop(
  engine: TrainEngine,
  input: TrainStepRequest,
  opts: TrainLoopOptions = {},
): Promise<TrainLoopResult> {
  const b = input.batch;

  // ---- 1. plan ----
  const plan = trainerPlan(input.losses);
  const hyper: Partial<TrainHyper> = {
    lr: input.lr,
    clipEpsLow: plan.clipEps,
    clipEpsHigh: plan.clipEps,
    lambda: plan.lambda,
    ...(plan.dpoBeta !== undefined ? { dpoBeta: plan.dpoBeta } : {}),
    ...(opts.decoupled ? { behaviourWeightCap: opts.decoupled.behaviourWeightCap } : {}),
  };

  // ---- 2. prepare (version k, before any update) ----
  if (plan.referenceLogprobs) {
    if (!opts.reference) throw new Error('trainLoop: a loss term needs the reference policy; none given');
    const reference = await opts.reference();
    b.refLogp = await referenceSeqLogprobs(b, (seqs) => reference.logprobs(seqs));
  }
  const logprobs = (seqs: number[][]) => engine.logprobs(seqs);
  if (plan.recomputeOld) await recomputeOldLogprobs(b, logprobs);
  if (opts.decoupled) b.proxLogprobs = await proxLogprobsOf(b, logprobs);

  // ---- 3. updates ----
  const t0 = performance.now();
  const sums: Record<string, number> = {};
  const total = input.epochs * b.miniBatches.length;
  let updates = 0;
  for (let epoch = 0; epoch < input.epochs; epoch++) {
    for (let i = 0; i < b.miniBatches.length; i++) {
      const mb = sliceMiniBatch(b, i, { padRowsTo: input.rowsPerUpdate, padId: input.padId });
      if (!plan.trainsAkbeWeight) mb.akbeWeight.fill(0);
      const batch = {
        inputIds: BigInt64Array.from(mb.inputIds, (x) => BigInt(x)),
        lossMask: mb.lossMask,
        oldLogprobs: mb.oldLogprobs,
        proxLogprobs: mb.proxLogprobs, // read only by a decoupled Trainer (maxStaleness >= 1)
        advantages: mb.advantages,
        pgWeight: mb.pgWeight,
        akbeWeight: mb.akbeWeight,
        dpoPairs: mb.dpoPairMatrix,
        dpoWeight: mb.dpoWeight,
        refLogp: mb.refLogp,
      };
      const m = await engine.trainStep({ batch, hyper }, { transfer: true });
      for (const k of MEAN_KEYS) if (m[k] !== undefined) sums[k] = (sums[k] ?? 0) + m[k];
      updates++;
      await opts.onUpdate?.(updates, total);
    }
  }

  // ---- 4. metrics ----
  const trainSeconds = (performance.now() - t0) / 1000;
  const metrics: Record<string, number> = { updates, trainSeconds };
  for (const k of MEAN_KEYS)
    if (!OPTIONAL_KEYS.has(k) || k in sums) metrics[k] = updates ? sums[k] / updates : 0;
  metrics.tokensPerSecond = trainSeconds > 0 ? (b.rows * b.T * input.epochs) / trainSeconds : 0;
  return { metrics, ...(b.refLogp ? { refLogp: b.refLogp } : {}) };
}

/**
 * Fills log pi_old of the re-conditioned rows (`recomputeOld` 1: no-tool targets under the
 * with-tool prompt, src/rl/batch.ts) in place, with `logprobs` of the step's policy version k,
 * before any update. Row r's sequence is its `length` unpadded tokens; logprob t of it (token t+1)
 * lands at [r, t] of the [B, T-1] arrays, on loss-mask positions only (the rest stay 0).
 */
export async function recomputeOldLogprobs(
  b: TrainBatch,
  logprobs: (sequences: number[][]) => Promise<number[][]>,
): Promise<void> {
  const rows = [...b.recomputeOld.keys()].filter((r) => b.recomputeOld[r] === 1);
  await fillRowLogprobs(b, rows, logprobs, b.oldLogprobs);
}

/**
 * log pi_prox of every row (the decoupled objective's proximal policy: version k, the policy before
 * the step's first update), [B, T-1] laid out as oldLogprobs, on loss-mask positions (0 elsewhere).
 */
export async function proxLogprobsOf(
  b: TrainBatch,
  logprobs: (sequences: number[][]) => Promise<number[][]>,
): Promise<Float32Array> {
  const prox = new Float32Array(b.oldLogprobs.length);
  await fillRowLogprobs(
    b,
    b.rowInfo.map((_, r) => r),
    logprobs,
    prox,
  );
  return prox;
}

/** Writes `logprobs` of rows `rows` (their unpadded sequences) into `into` on loss-mask positions. */
async function fillRowLogprobs(
  b: TrainBatch,
  rows: number[],
  logprobs: (sequences: number[][]) => Promise<number[][]>,
  into: Float32Array,
): Promise<void> {
  if (rows.length === 0) return;
  const seqs = rows.map((r) => Array.from(b.inputIds.subarray(r * b.T, r * b.T + b.rowInfo[r].length)));
  const lps = await logprobs(seqs);
  rows.forEach((r, i) => {
    const base = r * (b.T - 1);
    lps[i].forEach((lp, t) => {
      if (b.lossMask[base + t] === 1) into[base + t] = lp;
    });
  });
}

/**
 * Each DPO pair row's sequence logprob under the reference (`logprobs` of v0): the sum over the
 * row's loss-mask positions (its generated tokens, in its context), 0 for rows in no pair.
 */
export async function referenceSeqLogprobs(
  b: TrainBatch,
  logprobs: (sequences: number[][]) => Promise<number[][]>,
): Promise<Float32Array> {
  const out = new Float32Array(b.rows);
  const rows = [...new Set((b.dpoPairs ?? []).flatMap((p) => [p.chosen, p.rejected]))].sort((x, y) => x - y);
  if (rows.length === 0) return out;
  const seqs = rows.map((r) => Array.from(b.inputIds.subarray(r * b.T, r * b.T + b.rowInfo[r].length)));
  const lps = await logprobs(seqs);
  rows.forEach((r, i) => {
    const base = r * (b.T - 1);
    out[r] = lps[i].reduce((a, lp, t) => a + (b.lossMask[base + t] === 1 ? lp : 0), 0);
  });
  return out;
}
