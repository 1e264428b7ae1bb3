/**
 * Plain-TypeScript reference of the GRPO + AKBE loss in src/gpu/losses.ts (AKBE's per-row weights
 * come from src/rl/batch.ts akbeRowWeights, checked by hand in test/rl-akbe-aggregation.test.ts) (test-only: it lives in
 * test/ so it neither ships nor counts as covered source): a per-token loop that
 * tests compare the graph (and its autodiff gradient) against. Flat arrays, row-major [B, T-1].
 * With `proxLogp` it is the decoupled form (ratio against pi_prox, weight pi_prox / pi_behav).
 * Subgradient conventions match the graph: at a tie of max/min the first argument wins, and
 * clip passes the gradient on its closed interval.
 */
import type { Aggregation, AkbeLossForm } from '../../src/gpu/losses.js';

export interface ReferenceLossInput {
  batch: number;
  /** Tokens per row (T - 1). */
  len: number;
  tokenLogp: number[];
  oldLogp: number[];
  /** The decoupled form (src/gpu/losses.ts): log pi_prox, the ratio's anchor; oldLogp is the behaviour policy's. */
  proxLogp?: number[];
  /** Decoupled form: tokens whose pi_prox / pi_behav exceeds it weigh 0. */
  behaviourWeightCap?: number;
  lossMask: number[];
  advantages: number[];
  pgWeight: number[];
  /** L_AKBE = sum_b akbeWeight[b] sum_t lossMask[b, t] l[b, t] (the batch's row weights carry its aggregation). */
  akbeWeight: number[];
  clipEpsLow: number;
  clipEpsHigh: number;
  dualClipC: number;
  ratioClamp: number;
  lambda: number;
  aggregation: Aggregation;
  akbeLoss: AkbeLossForm;
}

export interface ReferenceLossOutput {
  loss: number;
  pgLoss: number;
  akbeLoss: number;
  clipFrac: number;
  approxKl: number;
  /** d loss / d tokenLogp, [B, T-1]. */
  grad: number[];
}

/** Per-token aggregation weights: loss = sum_i w_i x_i. */
function aggWeights(mask: number[], batch: number, len: number, agg: Aggregation): number[] {
  if (agg === 'token-mean') {
    const total = Math.max(
      mask.reduce((a, b) => a + b, 0),
      1,
    );
    return mask.map((m) => m / total);
  }
  const counts = Array.from({ length: batch }, (_, b) =>
    mask.slice(b * len, (b + 1) * len).reduce((a, c) => a + c, 0),
  );
  const nSeq = Math.max(counts.filter((c) => c > 0).length, 1);
  return mask.map((m, i) => m / (Math.max(counts[Math.floor(i / len)], 1) * nSeq));
}

/** Pessimistic clipped surrogate max(-A r, -A clip(r)) and its derivative w.r.t. r. */
function surrogate(r: number, a: number, lo: number, hi: number) {
  const u = -a * r;
  const rc = Math.min(Math.max(r, lo), hi);
  const c = -a * rc;
  if (u >= c) return { value: u, dr: -a, clippedWins: false };
  return { value: c, dr: r >= lo && r <= hi ? -a : 0, clippedWins: true };
}

export function referenceLoss(x: ReferenceLossInput): ReferenceLossOutput {
  const { batch, len } = x;
  const n = batch * len;
  const pgMask = Array.from({ length: n }, (_, i) => x.lossMask[i] * x.pgWeight[Math.floor(i / len)]);
  const akMask = Array.from({ length: n }, (_, i) => x.lossMask[i] * x.akbeWeight[Math.floor(i / len)]);
  const wPg = aggWeights(pgMask, batch, len, x.aggregation);
  const wAk = akMask; // already weighted: lossMask * akbeWeight
  const wTokPg = aggWeights(pgMask, batch, len, 'token-mean');
  const lo = 1 - x.clipEpsLow;
  const hi = 1 + x.clipEpsHigh;
  let pgLoss = 0;
  let akbeLoss = 0;
  let clipFrac = 0;
  let approxKl = 0;
  const grad = new Array<number>(n).fill(0);
  for (let i = 0; i < n; i++) {
    const a = x.advantages[Math.floor(i / len)];
    const anchor = x.proxLogp ? x.proxLogp[i] : x.oldLogp[i];
    const d = x.tokenLogp[i] - anchor;
    const logRatio = Math.min(Math.max(d, -x.ratioClamp), x.ratioClamp);
    const r = Math.exp(logRatio);
    const drdlp = Math.abs(d) <= x.ratioClamp ? r : 0;

    // GRPO token loss with dual clip for negative advantages.
    const s = surrogate(r, a, lo, hi);
    let value = s.value;
    let dr = s.dr;
    if (a < 0 && value > -a * x.dualClipC) {
      value = -a * x.dualClipC;
      dr = 0;
    }
    // Decoupled form: the behaviour importance weight, a constant of the step.
    let w = 1;
    if (x.proxLogp) {
      w = Math.exp(x.proxLogp[i] - x.oldLogp[i]);
      if (w > (x.behaviourWeightCap ?? Number.POSITIVE_INFINITY)) w = 0;
    }
    pgLoss += wPg[i] * w * value;
    grad[i] += wPg[i] * w * dr * drdlp;
    clipFrac += wTokPg[i] * (s.clippedWins ? 1 : 0);
    approxKl += wTokPg[i] * (r - 1 - logRatio);

    // AKBE token loss.
    if (x.akbeLoss === 'nll') {
      akbeLoss += wAk[i] * -x.tokenLogp[i];
      grad[i] += x.lambda * wAk[i] * -1;
    } else {
      const t = surrogate(r, 1, lo, hi);
      akbeLoss += wAk[i] * w * t.value;
      grad[i] += x.lambda * wAk[i] * w * t.dr * drdlp;
    }
  }
  return { loss: pgLoss + x.lambda * akbeLoss, pgLoss, akbeLoss, clipFrac, approxKl, grad };
}
