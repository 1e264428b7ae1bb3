/**
 * The training-step graph: forward, GRPO + AKBE loss, backward, global-norm gradient clipping
 * and AdamW, all in ONE ORT session. Parameters and AdamW moments are inputs; their updated
 * values are outputs that the Trainer feeds back next step (optimizer 'graph'). With optimizer
 * 'host' the graph stops at the gradients and AdamW's scalars, and src/gpu/adamw.ts updates the
 * Trainer's arrays in place (no updated copies of parameters and moments: ~5 x 4 bytes/parameter).
 *
 * Phases, in graph order:
 *   1. forward      tokenLogp [B, T-1], logp [B, T-1, V] = nextTokenLogprobs(params, input_ids), or
 *                   in chunks of positions (lm-head.ts, `logitsChunk`) tokenLogp and the entropy alone
 *   2. loss         GRPO + lambda AKBE (src/gpu/losses.ts) and metrics
 *   3. backward     grads = d loss / d params (tape autodiff)
 *   4. clip         grad_norm = ||grads||_2 (before clipping); grads *= min(1, max_grad_norm / (grad_norm + 1e-6))
 *   5. AdamW        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *                   p = p (1 - lr wd) - lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)
 *                   (decoupled decay, torch.optim.AdamW; decay only on matrices and embeddings,
 *                   not on biases and norm weights, as GPT-2 / nanoGPT)
 *
 * The same graph for every architecture (architecture.ts): only the forward differs.
 *
 * Inputs: parameters (contract names), `adam_m.<name>`, `adam_v.<name>`, `input_ids` int64
 * [B, T], `loss_mask` [B, T-1], `old_logprobs` [B, T-1], `advantages` [B], `pg_weight` [B],
 * `akbe_weight` [B], and the scalars of HYPER_INPUTS; with `decoupled` also `prox_logprobs`
 * [B, T-1] and the scalar `behaviour_weight_cap` (the decoupled objective, src/gpu/losses.ts); with `dpo`
 * also `dpo_pairs` [B, B] (B pair slots), `dpo_weight` [B], `ref_logprobs` [B] and the scalar `dpo_beta`
 * (the DPO term, output `dpo_loss`). Outputs: METRIC_OUTPUTS, `logprobs`
 * [B, T-1] (before the update), `new.<name>`, `new_adam_m.<name>`, `new_adam_v.<name>`, and with
 * `gradOutputs` the unclipped `grad.<name>` (for tests). With `optimizer: 'host'`: no moment
 * inputs and no `adam_eps`; outputs `grad.<name>` and ADAMW_SCALAR_OUTPUTS instead of `new*`.
 */
import { ADAMW_SCALAR_OUTPUTS } from './adamw.js';
import { architecture, type PolicyConfig } from './architecture.js';
import { Graph, type Graph as GraphT, gradients, ops, type Tensor } from './graph/index.js';
import { fuseTiedGradient, trainHead } from './lm-head.js';
import { type Aggregation, type AkbeLossForm, graphLossTerms, type LossHyper, lossGraph } from './losses.js';
import { declareParams, type FloatDType } from './policy-graphs.js';

const { add, sub, mul, div, sqrt, pow, min, reduceSum } = ops;

/** Scalar hyperparameter inputs, fed every step (so schedules need no new session). */
export const HYPER_INPUTS = [
  'lr',
  'beta1',
  'beta2',
  'adam_eps',
  'weight_decay',
  'max_grad_norm',
  'clip_eps_low',
  'clip_eps_high',
  'dual_clip_c',
  'ratio_clamp',
  'lambda',
  'step',
] as const;
export type HyperName = (typeof HYPER_INPUTS)[number];

export const METRIC_OUTPUTS = [
  'loss',
  'pg_loss',
  'akbe_loss',
  'grad_norm',
  'clip_frac',
  'approx_kl',
  'entropy',
] as const;
export type MetricName = (typeof METRIC_OUTPUTS)[number];

export interface TrainGraphOptions {
  batch: number;
  seq: number;
  dtype?: FloatDType;
  aggregation?: Aggregation;
  akbeLoss?: AkbeLossForm;
  /** The dual clip (losses.ts; default on); off, the `dual_clip_c` input is unread. */
  dualClip?: boolean;
  /** The ±ratio_clamp log-ratio clamp (losses.ts; default on); off, the `ratio_clamp` input is unread. */
  logRatioClamp?: boolean;
  /**
   * The decoupled PPO objective (AReaL): the graph takes `prox_logprobs` (pi_prox, the version
   * before this update) beside `old_logprobs` (the behaviour policy's) and `behaviour_weight_cap`.
   */
  decoupled?: boolean;
  /** The DPO term (dpo-akbe): pair inputs, the reference's sequence logprobs, beta; output `dpo_loss`. */
  dpo?: boolean;
  /** Also output the unclipped gradients `grad.<name>` (tests). */
  gradOutputs?: boolean;
  /**
   * 'graph' (phase 5 in the graph: moments are inputs, `new.*` / `new_adam_*` outputs) or 'host'
   * (no moment inputs and no `adam_eps`; the graph outputs `grad.<name>` and the scalars of
   * ADAMW_SCALAR_OUTPUTS, and src/gpu/adamw.ts updates the trainer's arrays in place). Default 'graph'.
   */
  optimizer?: 'graph' | 'host';
  /**
   * Positions per chunk of the lm head (src/gpu/lm-head.ts): the [B (T-1), V] logits, softmax
   * and gradient exist one chunk at a time (recomputed in the backward). Default: rows of at most
   * 64 MiB ([rows, V] values), which is one chunk, today's unchunked graph, for small vocabularies
   * and batches.
   */
  logitsChunk?: number;
}

/** Parameters that get weight decay: matrices and embeddings (rank >= 2). */
export const decays = (shape: number[]) => shape.length >= 2;

export function buildTrainGraph(cfg: PolicyConfig, opts: TrainGraphOptions): GraphT {
  const dtype = opts.dtype ?? 'float32';
  const arch = architecture(cfg);
  const g = new Graph({ name: `${arch.name}_train_step` });
  const shapes = arch.paramShapes();
  const p = declareParams(g, cfg, dtype);
  const host = opts.optimizer === 'host';
  const io = declareRowInputs(g, opts, dtype);
  const hp = declareHyperInputs(g, dtype, host);

  // ---- 1. forward ----
  // tokenLogp [B, T-1]; logp [B, T-1, V] unchunked, or tokEntropy [B, T-1] in chunks (lm-head.ts)
  const fwd = trainHead(cfg, p, io.inputIds, { dtype, logitsChunk: opts.logitsChunk });

  // ---- 2. loss ----
  const loss = addLoss(g, { opts, dtype, hp, fwd, io });

  // ---- 3. backward ----
  // Chunked head: a tied embedding's rows go straight into the head's gradient (lm-head.ts).
  const fuse = fwd.tokEntropy ? fuseTiedGradient : (gr: Tensor) => gr;
  const grads = gradients(
    loss.loss,
    shapes.map((s) => p.get(s.name)!),
  ).map(fuse);

  // ---- 4. global-norm clipping ----
  const { gradNorm, coef } = globalNormClip(g, grads, hp.max_grad_norm, dtype);

  // ---- 5. AdamW ----
  addAdamW(g, { shapes, grads, p, hp, coef, dtype, host, gradOutputs: opts.gradOutputs === true });

  // Each term's value and metric under the output name its builder gives (losses.ts).
  g.output(loss.loss, 'loss');
  for (const [name, value] of loss.values) g.output(value, name);
  g.output(gradNorm, 'grad_norm');
  for (const [name, metric] of loss.metrics) g.output(metric, name);
  g.output(fwd.tokenLogp, 'logprobs');
  return g;
}

/** The per-row inputs (token ids, mask, behaviour logprobs, row weights), in the graph's input order. */
function declareRowInputs(g: GraphT, opts: TrainGraphOptions, dtype: FloatDType) {
  const { batch: B, seq: T } = opts;
  return {
    inputIds: g.input('input_ids', 'int64', [B, T]),
    lossMask: g.input('loss_mask', dtype, [B, T - 1]),
    oldLogp: g.input('old_logprobs', dtype, [B, T - 1]),
    advantages: g.input('advantages', dtype, [B]),
    pgWeight: g.input('pg_weight', dtype, [B]),
    akbeWeight: g.input('akbe_weight', dtype, [B]),
    proxLogp: opts.decoupled ? g.input('prox_logprobs', dtype, [B, T - 1]) : undefined,
  };
}

/** The scalar inputs of HYPER_INPUTS; the host optimizer adds eps itself (an input nothing reads would only warn). */
function declareHyperInputs(g: GraphT, dtype: FloatDType, host: boolean): Record<HyperName, Tensor> {
  const names = HYPER_INPUTS.filter((n) => !(host && n === 'adam_eps'));
  return Object.fromEntries(names.map((n) => [n, g.input(n, dtype, [])])) as Record<HyperName, Tensor>;
}

/**
 * Phase 2: the loss terms of these options (losses.ts), with the inputs only some terms read
 * (`behaviour_weight_cap` when decoupled, the DPO pair inputs) declared after the forward, as before.
 */
function addLoss(
  g: GraphT,
  a: {
    opts: TrainGraphOptions;
    dtype: FloatDType;
    hp: Record<HyperName, Tensor>;
    fwd: ReturnType<typeof trainHead>;
    io: ReturnType<typeof declareRowInputs>;
  },
) {
  const { opts, dtype, hp, fwd, io } = a;
  const B = opts.batch;
  const hyper: LossHyper = {
    clipEpsLow: hp.clip_eps_low,
    clipEpsHigh: hp.clip_eps_high,
    dualClipC: hp.dual_clip_c,
    ratioClamp: hp.ratio_clamp,
    lambda: hp.lambda,
    behaviourWeightCap: opts.decoupled ? g.input('behaviour_weight_cap', dtype, []) : undefined,
  };
  // B pair slots: a mini-batch never holds more pairs than rows.
  const dpo = opts.dpo
    ? {
        pairs: g.input('dpo_pairs', dtype, [B, B]),
        weight: g.input('dpo_weight', dtype, [B]),
        refLogp: g.input('ref_logprobs', dtype, [B]),
        beta: g.input('dpo_beta', dtype, []),
      }
    : undefined;
  const lossOpts = {
    aggregation: opts.aggregation,
    akbeLoss: opts.akbeLoss,
    dualClip: opts.dualClip,
    logRatioClamp: opts.logRatioClamp,
  };
  return lossGraph(
    {
      tokenLogp: fwd.tokenLogp,
      logp: fwd.logp,
      tokEntropy: fwd.tokEntropy,
      oldLogp: io.oldLogp,
      proxLogp: io.proxLogp,
      lossMask: io.lossMask,
      advantages: io.advantages,
      pgWeight: io.pgWeight,
      akbeWeight: io.akbeWeight,
      dpo,
    },
    hyper,
    lossOpts,
    graphLossTerms(lossOpts, dpo !== undefined),
  );
}

/** The global gradient norm and the clipping coefficient min(max_norm / (norm + 1e-6), 1). */
function globalNormClip(g: GraphT, grads: Tensor[], maxNorm: Tensor, dtype: FloatDType) {
  const sq = grads.map((gr) => reduceSum(mul(gr, gr)));
  const [sumSq] = g.addNode('Sum', sq, {}, [{ dtype, shape: [] }]);
  const gradNorm = sqrt(sumSq);
  return { gradNorm, coef: min(div(maxNorm, add(gradNorm, 1e-6)), 1) };
}

/**
 * AdamW on the clipped gradients: in the graph (moments in, `new.*` / `new_adam_*` out), or for the
 * host optimizer only its scalars and the gradients out (src/gpu/adamw.ts updates in place).
 */
function addAdamW(
  g: GraphT,
  a: {
    shapes: ReadonlyArray<{ name: string; shape: number[] }>;
    grads: Tensor[];
    p: Map<string, Tensor>;
    hp: Record<HyperName, Tensor>;
    coef: Tensor;
    dtype: FloatDType;
    host: boolean;
    gradOutputs: boolean;
  },
): void {
  const { shapes, grads, p, hp, coef, dtype, host } = a;
  const names = shapes.map((s) => s.name);
  // Scalars first, so each parameter pays only for elementwise work.
  const s1 = mul(sub(1, hp.beta1), coef); // (1 - b1) coef
  const s2 = mul(sub(1, hp.beta2), mul(coef, coef)); // (1 - b2) coef^2
  const stepSize = div(hp.lr, sub(1, pow(hp.beta1, hp.step))); // lr / bc1
  const invSqrtBc2 = div(1, sqrt(sub(1, pow(hp.beta2, hp.step)))); // 1 / sqrt(bc2)
  const keep = sub(1, mul(hp.lr, hp.weight_decay)); // decoupled decay factor
  if (host) {
    const scalars = { s1, s2, stepSize, invSqrtBc2, keep };
    for (const [k, out] of Object.entries(ADAMW_SCALAR_OUTPUTS))
      g.output(scalars[k as keyof typeof scalars], out);
    names.forEach((name, k) => {
      g.output(grads[k], `grad.${name}`);
    });
  } else {
    const m = new Map(shapes.map(({ name, shape }) => [name, g.input(`adam_m.${name}`, dtype, shape)]));
    const v = new Map(shapes.map(({ name, shape }) => [name, g.input(`adam_v.${name}`, dtype, shape)]));
    shapes.forEach(({ name, shape }, k) => {
      const gr = grads[k];
      const m1 = add(mul(m.get(name)!, hp.beta1), mul(gr, s1));
      const v1 = add(mul(v.get(name)!, hp.beta2), mul(mul(gr, gr), s2));
      const denom = add(mul(sqrt(v1), invSqrtBc2), hp.adam_eps);
      const pk = p.get(name)!;
      const decayed = decays(shape) ? mul(pk, keep) : pk;
      g.output(sub(decayed, mul(div(m1, denom), stepSize)), `new.${name}`);
      g.output(m1, `new_adam_m.${name}`);
      g.output(v1, `new_adam_v.${name}`);
      if (a.gradOutputs) g.output(gr, `grad.${name}`);
    });
  }
}
