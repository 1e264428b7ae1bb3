/**
 * Plain-TypeScript reference of the GRPO + AKBE loss in src/gpu/losses.ts: a per-token loop that
 * tests compare the graph (and its autodiff gradient) against. Flat arrays, row-major [B, T-1].
 * Subgradient conventions match the graph: at a tie of max/min the first argument wins, and
 * clip passes the gradient on its closed interval.
 */
import type { Aggregation, AkbeLossForm } from './losses.js';

export interface ReferenceLossInput {
  batch: number;
  /** Tokens per row (T - 1). */
  len: number;
  tokenLogp: number[];
  oldLogp: number[];
  lossMask: number[];
  advantages: number[];
  pgWeight: number[];
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
  const wAk = aggWeights(akMask, batch, len, x.aggregation);
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
    const d = x.tokenLogp[i] - x.oldLogp[i];
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
    pgLoss += wPg[i] * value;
    grad[i] += wPg[i] * dr * drdlp;
    clipFrac += wTokPg[i] * (s.clippedWins ? 1 : 0);
    approxKl += wTokPg[i] * (r - 1 - logRatio);

    // AKBE token loss.
    if (x.akbeLoss === 'nll') {
      akbeLoss += wAk[i] * -x.tokenLogp[i];
      grad[i] += x.lambda * wAk[i] * -1;
    } else {
      const t = surrogate(r, 1, lo, hi);
      akbeLoss += wAk[i] * t.value;
      grad[i] += x.lambda * wAk[i] * t.dr * drdlp;
    }
  }
  return { loss: pgLoss + x.lambda * akbeLoss, pgLoss, akbeLoss, clipFrac, approxKl, grad };
}
