/**
 * GRPO + AKBE policy loss as graph ops (DESIGN.md section 1, item 4; paper:
 * ../shared/reference/akbe-paper.txt). All per-token tensors are [B, T-1]: position t scores
 * token t+1 of the sequence. Per-sequence inputs are [B] and broadcast over tokens.
 *
 *   r        = exp(clip(logp - old_logp, -ratio_clamp, ratio_clamp))          [B, T-1]
 *              (the clamp is VeRL's ±20 overflow guard; logRatioClamp: false omits it)
 *   pg_tok   = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))               (PPO, pessimistic)
 *   pg_tok   = min(pg_tok, -A c)            where A < 0                      (dual clip, VeRL's
 *              clip_ratio_c = 3, Ye et al. 2020; dualClip: false omits it)
 *   L_GRPO   = agg(pg_tok, loss_mask * pg_weight)                             (see Aggregation)
 *   L_AKBE   = sum_{b,t} akbe_weight[b] loss_mask[b,t] akbe_tok[b,t]          (a weighted sum: the
 *              weights carry the aggregation, src/rl/batch.ts akbeRowWeights: per-target
 *              1 / (targets * row tokens), pooled 1 / target tokens)
 *   akbe_tok = -logp                                                          ('nll')
 *            | max(-r, -clip(r, 1 - eps_low, 1 + eps_high))                   ('clipped': A = +1)
 *   loss     = L_GRPO + lambda * L_AKBE (+ lambda * L_DPO)
 *
 * DPO term (dpo-akbe; Rafailov et al. 2023, arXiv 2305.18290, eq. 7), given `dpo` inputs:
 *   s[b]     = sum_t loss_mask[b,t] logp[b,t]                                 sequence logprob [B]
 *   m[p]     = sum_b pairs[p,b] (s[b] - ref[b])                               pairs [P, B]: +1 at
 *              pair p's chosen row, -1 at its rejected row: m = (s_w - ref_w) - (s_l - ref_l)
 *   L_DPO    = sum_p w[p] * -log sigmoid(beta m[p])                           w = 1 / pairs (0 on
 *              unused slots); -log sigmoid(z) = logsumexp(0, z) - z, taken as -LogSoftmax([0, z])[1]
 *              (exact and overflow-free for any z, no kink at z = 0)
 *
 * Decoupled form (AReaL, Fu et al. 2025, arXiv 2505.24298, §5: "Decoupled PPO"), for rows whose
 * behaviour policy (the version that sampled them, logprobs = old_logp) may be older than the
 * proximal policy (the version before this update, prox_logp, recomputed by the trainer):
 *   r        = exp(clip(logp - prox_logp, -ratio_clamp, ratio_clamp))        (the trust region is
 *              centred on the proximal policy, not on the behaviour policy)
 *   w        = exp(prox_logp - old_logp) if <= behaviour_weight_cap, else 0  (AReaL's
 *              behav_imp_weight_cap: tokens whose weight exceeds the cap are dropped; they still
 *              count in the token-mean's denominator, as in AReaL's ppo_actor_loss_fn)
 *   pg_tok   = w * (the dual-clipped pg_tok above, with this r)
 *   akbe_tok = w * max(-r, -clip(r, 1 - eps_low, 1 + eps_high))               ('clipped'; 'nll' unchanged)
 * w is a constant of the step (no gradient). With prox_logp = old_logp, w = exp(0) = 1 exactly and
 * every value and gradient equals the coupled form's.
 *
 * Each term (grpo, akbe-nll | akbe-clipped, dpo) is a builder registered under its loss name
 * (registerLossTermBuilder) returning { loss, metrics }; lossGraph sums the values (the scaled ones
 * times lambda) and collects the metrics, knowing no term by name.
 *
 * Metrics (no gradient): pg_clipfrac = share of GRPO tokens where the clipped term is the larger
 * one; approx_kl = k3 estimator of KL(pi_old || pi), mean over GRPO tokens of (r - 1) - log r
 * (unbiased, always >= 0; Schulman, "Approximating KL divergence", 2020); entropy = token mean of
 * -sum_v p log p over every loss token (GRPO or AKBE).
 */
import { ops, type Tensor } from './graph/index.js';

const { add, sub, mul, div, max, min, neg, exp, clip, where, less, greater, reduceSum, unsqueeze } = ops;

/**
 * How L_GRPO averages its token terms (VeRL's loss_agg_mode), over the rows with GRPO weight:
 *   token-mean           sum of every token's term / every token (DAPO; the default)
 *   seq-mean-token-mean  mean over rows of each row's token-mean (the paper's 1/|o| per trajectory)
 *   seq-mean-token-sum   mean over rows of each row's token sum (Dr. GRPO-like, length-weighted)
 * Rows with no GRPO token (AKBE targets, padding) are left out of the row mean.
 */
export type Aggregation = 'token-mean' | 'seq-mean-token-mean' | 'seq-mean-token-sum';
export const AGGREGATIONS: readonly Aggregation[] = [
  'token-mean',
  'seq-mean-token-mean',
  'seq-mean-token-sum',
];
export type AkbeLossForm = 'nll' | 'clipped';

export interface LossHyper {
  clipEpsLow: Tensor; // scalar
  clipEpsHigh: Tensor; // scalar
  dualClipC: Tensor; // scalar, > 1
  ratioClamp: Tensor; // scalar: bound on |logp - old_logp| before exp (overflow guard)
  lambda: Tensor; // scalar: AKBE weight
  /** Decoupled form only: tokens whose pi_prox / pi_behav exceeds it get weight 0. */
  behaviourWeightCap?: Tensor; // scalar, > 1
}

export interface LossInputs {
  tokenLogp: Tensor; // [B, T-1] log pi(x_{t+1} | x_<=t)
  logp?: Tensor; // [B, T-1, V] full log-softmax, for the entropy metric
  tokEntropy?: Tensor; // [B, T-1] the per-token entropy itself (the chunked head, src/gpu/lm-head.ts)
  oldLogp: Tensor; // [B, T-1] log pi_old of the same tokens: the behaviour policy's
  /** [B, T-1] log pi_prox (the version before this update): given, the loss is the decoupled form. */
  proxLogp?: Tensor;
  lossMask: Tensor; // [B, T-1] 1 on generated tokens, 0 on prompt / tool observations / padding
  advantages: Tensor; // [B]
  pgWeight: Tensor; // [B] 1 for GRPO samples
  akbeWeight: Tensor; // [B] > 0 on AKBE target sequences: the row's weight in L_AKBE's sum
  /** The DPO term's inputs (dpo-akbe); absent, the loss has no DPO term. */
  dpo?: DpoInputs;
}

export interface DpoInputs {
  pairs: Tensor; // [P, B] +1 chosen row, -1 rejected row of pair slot p
  weight: Tensor; // [P] the slot's weight in L_DPO (0 unused)
  refLogp: Tensor; // [B] sequence logprob of each row under the frozen reference
  beta: Tensor; // scalar
}

export interface LossOptions {
  aggregation?: Aggregation;
  akbeLoss?: AkbeLossForm;
  /** Apply the dual clip (min with -A c for A < 0); default true. `dualClipC` is unread without it. */
  dualClip?: boolean;
  /** Clamp the log ratio to ±ratioClamp before exp; default true. `ratioClamp` is unread without it. */
  logRatioClamp?: boolean;
}

export interface LossOutputs {
  loss: Tensor;
  pgLoss: Tensor;
  akbeLoss: Tensor;
  /** L_DPO (0 without `dpo` inputs). */
  dpoLoss?: Tensor;
  clipFrac: Tensor;
  approxKl: Tensor;
  entropy?: Tensor;
}

/** Mean of x [B, T-1] over mask [B, T-1]; an all-zero mask gives 0, not NaN. */
export function maskedMean(x: Tensor, mask: Tensor, agg: Aggregation = 'token-mean'): Tensor {
  if (agg === 'token-mean') return div(reduceSum(mul(x, mask)), max(reduceSum(mask), 1));
  const perSeqCount = reduceSum(mask, [1]); // [B]
  const perSeqSum = reduceSum(mul(x, mask), [1]); // [B]
  const perSeq = agg === 'seq-mean-token-sum' ? perSeqSum : div(perSeqSum, max(perSeqCount, 1)); // [B]
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

/** pi_prox / pi_behav per token, 0 where it exceeds the cap (AReaL drops those tokens). */
function behaviourWeight(proxLogp: Tensor, behavLogp: Tensor, h: LossHyper): Tensor {
  if (!h.behaviourWeightCap) throw new Error('policyLoss: the decoupled form needs behaviourWeightCap');
  const w = exp(sub(proxLogp, behavLogp)); // may overflow to +Inf: `where` drops it, never Inf * 0
  return where(greater(w, h.behaviourWeightCap), 0, w);
}

/**
 * What the loss terms share: the inputs, the hyperparameters, the per-token masks, and the ratio and
 * behaviour weight, each built once on first use (GRPO and akbe-clipped read the same ratio).
 */
export interface LossContext {
  inp: LossInputs;
  h: LossHyper;
  opts: LossOptions;
  adv: Tensor; // [B, 1]
  pgMask: Tensor; // [B, T-1] the GRPO rows' loss tokens
  akbeMask: Tensor; // [B, T-1] the AKBE targets' loss tokens, weighted
  /** r and its (clamped) log: against pi_prox in the decoupled form, else pi_old. */
  ratio(): { ratio: Tensor; logRatio: Tensor };
  /** The decoupled form's behaviour weight (undefined in the coupled form). */
  weight(): Tensor | undefined;
}

/** What a loss term's builder returns: its value and its metrics (no gradient). */
export interface LossTermGraph {
  loss: Tensor;
  /**
   * Named metric nodes, built when called: after every term's value and the objective, so that the
   * graph's nodes keep the order (and the train graph its bytes) they had before the builders.
   */
  metrics?: () => Record<string, Tensor>;
}

/** A loss term of the training graph, registered under its loss name (src/rl/losses.ts LossName). */
export interface LossTermBuilder {
  /** The graph output holding the term's value. */
  output: string;
  /** In the objective scaled by lambda (L_AKBE, L_DPO: one lambda), else as is (L_GRPO). */
  scaled: boolean;
  build(ctx: LossContext): LossTermGraph;
}

const TERM_BUILDERS = new Map<string, LossTermBuilder>();
/** Registers the graph of the loss term `name` (the name src/rl/losses.ts registers it under). */
export function registerLossTermBuilder(name: string, b: LossTermBuilder): void {
  if (TERM_BUILDERS.has(name)) throw new Error(`loss term builder '${name}' is already registered`);
  TERM_BUILDERS.set(name, b);
}
/** The graph builder of the loss term `name`; throws naming the registered ones. */
export function lossTermBuilder(name: string): LossTermBuilder {
  const b = TERM_BUILDERS.get(name);
  if (!b)
    throw new Error(`no loss term builder '${name}' (registered: ${[...TERM_BUILDERS.keys()].join(', ')})`);
  return b;
}

registerLossTermBuilder('grpo', {
  output: 'pg_loss',
  scaled: false,
  build(ctx) {
    const { h, adv, pgMask } = ctx;
    const { ratio, logRatio } = ctx.ratio();
    const ppo = clippedSurrogate(ratio, adv, h);
    const weight = ctx.weight();
    const dualClipped =
      ctx.opts.dualClip === false
        ? ppo.loss
        : where(less(adv, 0), min(ppo.loss, mul(neg(adv), h.dualClipC)), ppo.loss);
    const pgTok = weight ? mul(weight, dualClipped) : dualClipped; // [B, T-1]
    const loss = maskedMean(pgTok, pgMask, ctx.opts.aggregation ?? 'token-mean');
    return {
      loss,
      metrics: () => ({
        clip_frac: maskedMean(ops.cast(ppo.clippedWins, ctx.inp.tokenLogp.dtype), pgMask),
        approx_kl: maskedMean(sub(sub(ratio, 1), logRatio), pgMask),
      }),
    };
  },
});
registerLossTermBuilder('akbe-nll', {
  output: 'akbe_loss',
  scaled: true,
  build: (ctx) => ({ loss: reduceSum(mul(neg(ctx.inp.tokenLogp), ctx.akbeMask)) }),
});
registerLossTermBuilder('akbe-clipped', {
  output: 'akbe_loss',
  scaled: true,
  build(ctx) {
    const surrogate = clippedSurrogate(ctx.ratio().ratio, 1, ctx.h).loss;
    const weight = ctx.weight();
    return { loss: reduceSum(mul(weight ? mul(weight, surrogate) : surrogate, ctx.akbeMask)) };
  },
});
registerLossTermBuilder('dpo', {
  output: 'dpo_loss',
  scaled: true,
  build(ctx) {
    if (!ctx.inp.dpo) throw new Error('policyLoss: the DPO term needs the dpo inputs');
    return { loss: dpoTerm(ctx.inp.tokenLogp, ctx.inp.lossMask, ctx.inp.dpo) };
  },
});

/** The loss terms of a training graph: GRPO, the AKBE form, and DPO given its inputs. */
export function graphLossTerms(opts: LossOptions, dpo: boolean): string[] {
  return ['grpo', `akbe-${opts.akbeLoss ?? 'nll'}`, ...(dpo ? ['dpo'] : [])];
}

/** The objective and its parts, each under its graph output name, in graph-output order. */
export interface LossGraph {
  loss: Tensor;
  /** Each term's value under its output name (pg_loss, akbe_loss, dpo_loss), in term order. */
  values: [string, Tensor][];
  /** Each term's metrics, then entropy (given the full log-softmax). */
  metrics: [string, Tensor][];
}

function lossContext(inp: LossInputs, h: LossHyper, opts: LossOptions): LossContext {
  let ratio: { ratio: Tensor; logRatio: Tensor } | undefined;
  let weight: { w: Tensor | undefined } | undefined;
  return {
    inp,
    h,
    opts,
    adv: unsqueeze(inp.advantages, [1]),
    pgMask: mul(inp.lossMask, unsqueeze(inp.pgWeight, [1])),
    akbeMask: mul(inp.lossMask, unsqueeze(inp.akbeWeight, [1])),
    ratio() {
      if (!ratio) {
        const anchor = inp.proxLogp ?? inp.oldLogp; // the trust region's centre
        const raw = sub(inp.tokenLogp, anchor);
        const logRatio = opts.logRatioClamp === false ? raw : clip(raw, neg(h.ratioClamp), h.ratioClamp);
        ratio = { ratio: exp(logRatio), logRatio };
      }
      return ratio;
    },
    weight() {
      weight ??= { w: inp.proxLogp ? behaviourWeight(inp.proxLogp, inp.oldLogp, h) : undefined };
      return weight.w;
    },
  };
}

/**
 * The objective of the terms `names` (registered builders): the unscaled values plus lambda times the
 * sum of the scaled ones, and every term's metrics. No term is known here by its name.
 */
export function lossGraph(
  inp: LossInputs,
  h: LossHyper,
  opts: LossOptions,
  names: readonly string[],
): LossGraph {
  const ctx = lossContext(inp, h, opts);
  const terms = names.map((n) => {
    const b = lossTermBuilder(n);
    return { b, built: b.build(ctx) };
  });
  const sum = (xs: Tensor[]) => xs.reduce((a, b) => add(a, b));
  const scaled = terms.filter((t) => t.b.scaled).map((t) => t.built.loss);
  const plain = terms.filter((t) => !t.b.scaled).map((t) => t.built.loss);
  const lambdaPart = scaled.length > 0 ? mul(h.lambda, sum(scaled)) : undefined;
  const loss = lambdaPart ? (plain.length > 0 ? add(sum(plain), lambdaPart) : lambdaPart) : sum(plain);
  const metrics = terms.flatMap((t) => Object.entries(t.built.metrics?.() ?? {}));
  if (inp.logp || inp.tokEntropy) metrics.push(['entropy', entropyMetric(inp, inp.logp, inp.tokEntropy)]);
  return { loss, values: terms.map((t) => [t.b.output, t.built.loss]), metrics };
}

/** Token mean of -sum_v p log p over every loss token (GRPO or AKBE). */
function entropyMetric(inp: LossInputs, logp?: Tensor, given?: Tensor): Tensor {
  const dtype = inp.tokenLogp.dtype;
  const tokEntropy = given ?? neg(reduceSum(mul(exp(logp!), logp!), [2])); // [B, T-1]
  const isTarget = ops.cast(greater(inp.akbeWeight, 0), dtype); // [B]
  const anyWeight = max(inp.pgWeight, isTarget); // [B]
  return maskedMean(tokEntropy, mul(inp.lossMask, unsqueeze(anyWeight, [1])));
}

/** GRPO + lambda (AKBE (+ DPO given its inputs)), by name of output (the shape tests read). */
export function policyLoss(inp: LossInputs, h: LossHyper, opts: LossOptions = {}): LossOutputs {
  const r = lossGraph(inp, h, opts, graphLossTerms(opts, inp.dpo !== undefined));
  const out = new Map([...r.values, ...r.metrics]);
  return {
    loss: r.loss,
    pgLoss: out.get('pg_loss')!,
    akbeLoss: out.get('akbe_loss')!,
    dpoLoss: out.get('dpo_loss'),
    clipFrac: out.get('clip_frac')!,
    approxKl: out.get('approx_kl')!,
    entropy: out.get('entropy'),
  };
}

/** L_DPO of the pair slots (see the top of the file). */
export function dpoTerm(tokenLogp: Tensor, lossMask: Tensor, d: DpoInputs): Tensor {
  const seq = reduceSum(mul(tokenLogp, lossMask), [1]); // [B]
  const h = unsqueeze(sub(seq, d.refLogp), [0]); // [1, B]
  const z = unsqueeze(mul(d.beta, reduceSum(mul(d.pairs, h), [1])), [1]); // [P, 1]
  const logSig = ops.slice(ops.logSoftmax(ops.concat([mul(z, 0), z], 1), 1), [1], [2], [1]); // [P, 1]
  return neg(reduceSum(mul(d.weight, ops.squeeze(logSig, [1]))));
}
