/**
 * GRPO + AKBE policy loss as graph ops (DESIGN.md section 1, item 4; paper:
 * ../shared/reference/akbe-paper.txt). All per-token tensors are [B, T-1]: position t scores
 * token t+1 of the sequence. Per-sequence inputs are [B] and broadcast over tokens.
 *
 *   r        = exp(clip(logp - old_logp, -ratio_clamp, ratio_clamp))          [B, T-1]
 *   pg_tok   = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))               (PPO, pessimistic)
 *   pg_tok   = min(pg_tok, -A c)            where A < 0                      (dual clip, c = 3)
 *   L_GRPO   = agg(pg_tok, loss_mask * pg_weight)                             (token-mean | seq-mean-token-mean)
 *   L_AKBE   = agg(-logp, mask_akbe)                                          ('nll')
 *            | agg(max(-r, -clip(r, 1 - eps_low, 1 + eps_high)), mask_akbe)  ('clipped': A = +1)
 *   loss     = L_GRPO + lambda * L_AKBE,  mask_akbe = loss_mask * akbe_weight
 *
 * Metrics (no gradient): pg_clipfrac = share of GRPO tokens where the clipped term is the larger
 * one; approx_kl = k3 estimator of KL(pi_old || pi), mean over GRPO tokens of (r - 1) - log r
 * (unbiased, always >= 0; Schulman, "Approximating KL divergence", 2020); entropy = token mean of
 * -sum_v p log p over every loss token (GRPO or AKBE).
 */
import { ops, type Tensor } from './graph/index.js';

const { add, sub, mul, div, max, min, neg, exp, clip, where, less, greater, reduceSum, unsqueeze } = ops;

export type Aggregation = 'token-mean' | 'seq-mean-token-mean';
export type AkbeLossForm = 'nll' | 'clipped';
export const AGGREGATIONS: readonly Aggregation[] = ['token-mean', 'seq-mean-token-mean'];
export const AKBE_LOSS_FORMS: readonly AkbeLossForm[] = ['nll', 'clipped'];

export interface LossHyper {
  clipEpsLow: Tensor; // scalar
  clipEpsHigh: Tensor; // scalar
  dualClipC: Tensor; // scalar, > 1
  ratioClamp: Tensor; // scalar: bound on |logp - old_logp| before exp (overflow guard)
  lambda: Tensor; // scalar: AKBE weight
}

export interface LossInputs {
  tokenLogp: Tensor; // [B, T-1] log pi(x_{t+1} | x_<=t)
  logp?: Tensor; // [B, T-1, V] full log-softmax, for the entropy metric
  oldLogp: Tensor; // [B, T-1] log pi_old of the same tokens
  lossMask: Tensor; // [B, T-1] 1 on generated tokens, 0 on prompt / tool observations / padding
  advantages: Tensor; // [B]
  pgWeight: Tensor; // [B] 1 for GRPO samples
  akbeWeight: Tensor; // [B] 1 for AKBE target sequences
}

export interface LossOptions {
  aggregation?: Aggregation;
  akbeLoss?: AkbeLossForm;
}

export interface LossOutputs {
  loss: Tensor;
  pgLoss: Tensor;
  akbeLoss: Tensor;
  clipFrac: Tensor;
  approxKl: Tensor;
  entropy?: Tensor;
}

/** Mean of x [B, T-1] over mask [B, T-1]; an all-zero mask gives 0, not NaN. */
export function maskedMean(x: Tensor, mask: Tensor, agg: Aggregation = 'token-mean'): Tensor {
  if (agg === 'token-mean') return div(reduceSum(mul(x, mask)), max(reduceSum(mask), 1));
  const perSeqCount = reduceSum(mask, [1]); // [B]
  const perSeq = div(reduceSum(mul(x, mask), [1]), max(perSeqCount, 1)); // [B]
  const present = ops.cast(greater(perSeqCount, 0), x.dtype); // [B]
  return div(reduceSum(perSeq), max(reduceSum(present), 1));
}

/** PPO's pessimistic clipped surrogate per token, for advantages adv [B, 1] (or a number). */
function clippedSurrogate(ratio: Tensor, adv: Tensor | number, h: LossHyper) {
  const lo = sub(1, h.clipEpsLow);
  const hi = add(1, h.clipEpsHigh);
  const negAdv = typeof adv === 'number' ? -adv : neg(adv);
  const unclipped = mul(ratio, negAdv); // -A r
  const clipped = mul(clip(ratio, lo, hi), negAdv); // -A clip(r)
  return { loss: max(unclipped, clipped), clippedWins: greater(clipped, unclipped) };
}

export function policyLoss(inp: LossInputs, h: LossHyper, opts: LossOptions = {}): LossOutputs {
  const agg = opts.aggregation ?? 'token-mean';
  const dtype = inp.tokenLogp.dtype;
  const adv = unsqueeze(inp.advantages, [1]); // [B, 1]
  const pgMask = mul(inp.lossMask, unsqueeze(inp.pgWeight, [1])); // [B, T-1]
  const akbeMask = mul(inp.lossMask, unsqueeze(inp.akbeWeight, [1])); // [B, T-1]

  // ---- GRPO: token-level clipped surrogate with dual clip ----
  const logRatio = clip(sub(inp.tokenLogp, inp.oldLogp), neg(h.ratioClamp), h.ratioClamp); // [B, T-1]
  const ratio = exp(logRatio); // [B, T-1]
  const ppo = clippedSurrogate(ratio, adv, h);
  const dual = min(ppo.loss, mul(neg(adv), h.dualClipC)); // [B, T-1]
  const pgTok = where(less(adv, 0), dual, ppo.loss); // [B, T-1]
  const pgLoss = maskedMean(pgTok, pgMask, agg);

  // ---- AKBE over target sequences ----
  const akbeTok = opts.akbeLoss === 'clipped' ? clippedSurrogate(ratio, 1, h).loss : neg(inp.tokenLogp);
  const akbeLoss = maskedMean(akbeTok, akbeMask, agg);
  const loss = add(pgLoss, mul(h.lambda, akbeLoss));

  // ---- metrics ----
  const clipFrac = maskedMean(ops.cast(ppo.clippedWins, dtype), pgMask);
  const approxKl = maskedMean(sub(sub(ratio, 1), logRatio), pgMask);
  let entropy: Tensor | undefined;
  if (inp.logp) {
    const tokEntropy = neg(reduceSum(mul(exp(inp.logp), inp.logp), [2])); // [B, T-1]
    const anyWeight = max(inp.pgWeight, inp.akbeWeight); // [B]
    entropy = maskedMean(tokEntropy, mul(inp.lossMask, unsqueeze(anyWeight, [1])));
  }
  return { loss, pgLoss, akbeLoss, clipFrac, approxKl, entropy };
}
