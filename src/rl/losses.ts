/**
 * The trainer-side loss registry: names and option validation only. The math lives in the
 * training graph (src/gpu); this registry is what maps config choices to those names, so that
 * swapping an algorithm changes a name, not the trainer (house rule 10).
 *
 *   grpo          L_GRPO: token-mean PPO clipped surrogate over the with-tool rows
 *                 (grpoWeight = 1), advantage per row, ratio pi_theta / pi_old, KL beta = 0.
 *   akbe-nll      lambda * L_AKBE, L_AKBE = mean over targets of the token-mean NLL of the
 *                 target's generated tokens ('per-target'; or 'pooled', see AkbeAggregation);
 *                 old logprobs unused.
 *   akbe-clipped  lambda * PPO-style surrogate on the target rows with advantage +1 and the same
 *                 clip eps (the paper's appendix sets the AKBE clip threshold to 0.2).
 *   dpo           lambda * L_DPO over (chosen = the AKBE target, rejected) pairs, mean over a
 *                 mini-batch's pairs of -log sigmoid(beta [(s_w - ref_w) - (s_l - ref_l)]), s the
 *                 sequence logprob (sum over generated tokens) under pi_theta, ref under the frozen
 *                 reference v0 (Rafailov et al. 2023, eq. 7; the AKBE paper's DPO variant).
 *
 * grpo and akbe-clipped also have a decoupled form for stale rows (AReaL; src/gpu/losses.ts): the
 * ratio against the proximal policy, weighted by pi_prox / pi_behav up to config.behaviourWeightCap.
 * It is a property of the batch (proxLogprobs, src/rl/batch.ts), not another loss name; equal to
 * the coupled form when pi_prox = pi_behav.
 */
import { NamedRegistry } from './registry.js';

/**
 * How L_AKBE averages over the target tokens of a mini-batch. 'per-target' (default): the mean over
 * targets of each target's own token-mean NLL, the paper's L_AKBE (sum over q in S of the target's
 * length-normalised cross-entropy, divided by |S|) and the authors' code; 'pooled': one token-mean
 * over all target tokens, which weights a long target more than a short one (akbe before session 3).
 * The weights travel in the batch (src/rl/batch.ts akbeRowWeights). GRPO stays token-mean.
 */
export type AkbeAggregation = 'per-target' | 'pooled';
export const AKBE_AGGREGATIONS: readonly AkbeAggregation[] = ['per-target', 'pooled'];
export const DEFAULT_AKBE_AGGREGATION: AkbeAggregation = 'per-target';

/**
 * How L_GRPO averages its token terms (the training graph's Aggregation, src/gpu/losses.ts; kept
 * here as names so that src/rl imports nothing from src/gpu).
 */
export type LossAggregation = 'token-mean' | 'seq-mean-token-mean' | 'seq-mean-token-sum';
export const LOSS_AGGREGATIONS: readonly LossAggregation[] = [
  'token-mean',
  'seq-mean-token-mean',
  'seq-mean-token-sum',
];

/** The paper's lambda (0.05, §A) at its G_wt (16), from which `lambda: auto` scales. */
export const PAPER_LAMBDA = 0.05;
export const PAPER_G_WITH_TOOL = 16;

/**
 * The AKBE coefficient a config trains with: its number, or for 'auto' the paper's appendix-B rule
 * (lambda proportional to 1/G_wt: GRPO weights each of a question's G_wt rollouts 1/G_wt, AKBE its one
 * target at full weight), anchored at the paper's lambda = 0.05 for G_wt = 16: 0.8 / G_wt. (The
 * appendix's bare 1/G_wt gives 0.0625 at 16, which it calls close to its empirical 0.05.)
 */
export function effectiveLambda(cfg: { lambda: number | 'auto'; gWithTool?: number }): number {
  if (cfg.lambda !== 'auto') return cfg.lambda;
  if (cfg.gWithTool === undefined)
    throw new RangeError("lambda 'auto' needs gWithTool (lambda = 0.8 / G_wt)");
  return (PAPER_LAMBDA * PAPER_G_WITH_TOOL) / cfg.gWithTool;
}

export const LossName = {
  GRPO: 'grpo',
  AKBE_NLL: 'akbe-nll',
  AKBE_CLIPPED: 'akbe-clipped',
  DPO: 'dpo',
} as const;

/** DPO's beta where the AKBE paper gives none: Rafailov et al. 2023's usual 0.1. */
export const DEFAULT_DPO_BETA = 0.1;

/**
 * What one loss term asks of the training loop (src/train/train-loop.ts), which reads only this and
 * compares no loss name: the step's scalar hyperparameters, the arrays it must fill before the
 * first update, and how the term shapes the run's training graph.
 */
export interface LossTrainerNeeds {
  /** Scalar graph inputs the term sets from its options (the first term that sets one wins). */
  hyper?: { clipEps?: number; lambda?: number; dpoBeta?: number };
  /** The term trains the batch's akbeWeight rows (L_AKBE); with no such term they are zeroed. */
  trainsAkbeWeight?: boolean;
  /** pi_old of the rows marked recomputeOld is recomputed with version k before the first update. */
  recomputeOld?: boolean;
  /** The batch's refLogp: each DPO pair row's sequence logprob under the frozen reference v0. */
  referenceLogprobs?: boolean;
  /** The training graph has DPO's pair inputs (fixed for a run: src/actors/roles/roles.ts). */
  dpoGraph?: boolean;
}

/** What a loss term registers: a description, the options it reads and their validation. */
export interface LossSpec {
  description: string;
  /** Option keys the loss reads. */
  options: readonly string[];
  /** Throws a RangeError naming the option when a value is invalid. */
  validate(opts: Readonly<Record<string, unknown>>): void;
  /** What the training loop does for this term, given its (validated) options; default nothing. */
  trainer?(opts: Readonly<Record<string, number>>): LossTrainerNeeds;
}

const LOSSES = new NamedRegistry<LossSpec>('loss');
/** Registers a loss term under `name` (the trainer maps it to its graph). */
export const registerLoss = (name: string, spec: LossSpec): void => LOSSES.register(name, spec);
/** The loss term registered under `name`; throws naming the registered ones. */
export const getLoss = (name: string): LossSpec => LOSSES.get(name);
/** The names of every registered loss term. */
export const listLosses = (): string[] => LOSSES.names();

function requireNumber(
  opts: Readonly<Record<string, unknown>>,
  key: string,
  ok: (x: number) => boolean,
  rule: string,
): void {
  const v = opts[key];
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v))
    throw new RangeError(`loss option ${key} must be ${rule}, got ${JSON.stringify(v)}`);
}
const clipEps = (o: Readonly<Record<string, unknown>>) =>
  requireNumber(o, 'clipEps', (x) => x > 0 && x < 1, 'a number in (0, 1)');
const lambda = (o: Readonly<Record<string, unknown>>) =>
  requireNumber(o, 'lambda', (x) => x >= 0, 'a number >= 0');

registerLoss(LossName.GRPO, {
  description: 'token-mean PPO clipped surrogate over with-tool rollouts, GRPO advantages, beta = 0',
  options: ['clipEps'],
  validate: clipEps,
  trainer: (o) => ({ hyper: { clipEps: o.clipEps } }),
});
registerLoss(LossName.AKBE_NLL, {
  description: 'lambda * token-mean NLL of each question target (at most one per question)',
  options: ['lambda'],
  validate: lambda,
  trainer: (o) => ({ hyper: { lambda: o.lambda }, trainsAkbeWeight: true }),
});
registerLoss(LossName.AKBE_CLIPPED, {
  description: 'lambda * PPO-style clipped surrogate of each target with advantage +1',
  options: ['lambda', 'clipEps'],
  validate: (o) => {
    lambda(o);
    clipEps(o);
  },
  // Its clip eps is GRPO's (one graph input): the term's own copy only documents it.
  trainer: (o) => ({ hyper: { lambda: o.lambda }, trainsAkbeWeight: true, recomputeOld: true }),
});

registerLoss(LossName.DPO, {
  description: 'lambda * DPO loss of (AKBE target, most-tool-calls rollout) pairs against the frozen v0',
  options: ['lambda', 'beta'],
  validate: (o) => {
    lambda(o);
    requireNumber(o, 'beta', (x) => x > 0, 'a number > 0');
  },
  trainer: (o) => ({
    hyper: { lambda: o.lambda, dpoBeta: o.beta },
    referenceLogprobs: true,
    dpoGraph: true,
  }),
});

/** One term of a step's objective as sent to the trainer: the registered loss name and its options. */
export interface LossTerm {
  name: string;
  options: Record<string, number>;
}

/** What a step's loss terms together ask of the training loop (LossTrainerNeeds, merged). */
export interface TrainerPlan {
  /** PPO clip eps of the graph (0.2 when no term sets one). */
  clipEps: number;
  /** The weight of L_AKBE and L_DPO (0 when no term sets one). */
  lambda: number;
  dpoBeta?: number;
  trainsAkbeWeight: boolean;
  recomputeOld: boolean;
  referenceLogprobs: boolean;
  dpoGraph: boolean;
}

/** The merged needs of `terms`, each read from its registered spec (an unknown name throws). */
export function trainerPlan(terms: readonly LossTerm[]): TrainerPlan {
  const needs = terms.map((t) => getLoss(t.name).trainer?.(t.options) ?? {});
  const first = <K extends 'clipEps' | 'lambda' | 'dpoBeta'>(k: K) =>
    needs.find((n) => n.hyper?.[k] !== undefined)?.hyper?.[k];
  const any = (k: 'trainsAkbeWeight' | 'recomputeOld' | 'referenceLogprobs' | 'dpoGraph') =>
    needs.some((n) => n[k] === true);
  const dpoBeta = first('dpoBeta');
  return {
    clipEps: first('clipEps') ?? 0.2,
    lambda: first('lambda') ?? 0,
    ...(dpoBeta !== undefined ? { dpoBeta } : {}),
    trainsAkbeWeight: any('trainsAkbeWeight'),
    recomputeOld: any('recomputeOld'),
    referenceLogprobs: any('referenceLogprobs'),
    dpoGraph: any('dpoGraph'),
  };
}
