/**
 * The training config: every hyperparameter of a run, typed, with a default scaled to this
 * machine (2 CPU cores, a ~0.15M-parameter policy (assets/base: 146,944 parameters, counted from its safetensors), a synthetic world) and the paper's value
 * (AKBE, Qwen3-4B on 8×H20, appendix A) beside it. A config file overrides any subset; an
 * unknown key or a bad value throws a ConfigError that names the key.
 */
import { listAdvantages } from './advantages.js';
import { algorithmOptions, getAlgorithm, listAlgorithms } from './algorithms/index.js';
import { ConfigError } from './errors.js';
import {
  AKBE_AGGREGATIONS,
  type AkbeAggregation,
  LOSS_AGGREGATIONS,
  type LossAggregation,
} from './losses.js';

/** A run's training settings (configs/*.yaml `train:`), as validated by `validateTrainConfig`; docs/training.md describes each field. */
export interface TrainConfig {
  /** Algorithm name (src/rl/algorithms): 'akbe' = GRPO + lambda·L_AKBE; 'grpo' = the base method; 'otc-po', 'beta-grpo' = reward-shaping baselines. */
  algo: string;
  /** The algorithm's options (e.g. otc-po's `c`, beta-grpo's `beta`); unset ones take its defaults. */
  algoOptions: Record<string, number>;
  /** Training steps (each: rollouts of B questions by version k, then one learner step). */
  steps: number;
  /** B: questions per step. Paper: 64. */
  batchQuestions: number;
  /** M: questions per mini-batch (one optimizer update each). Paper: 8. */
  miniBatchQuestions: number;
  /** G_wt: with-tool rollouts per question. Paper: 16. */
  gWithTool: number;
  /** G_nt: no-tool rollouts per question. Paper: 8. */
  gNoTool: number;
  /** Searches allowed per trajectory. Paper: 6. */
  maxToolCalls: number;
  /** Response tokens (generated + observation) per trajectory. Paper: 6192. */
  maxResponseTokens: number;
  /**
   * AKBE coefficient. Paper: 0.05 (§A), chosen empirically. §B derives that lambda should scale as
   * 1/G_wt (GRPO spreads a question's gradient over G_wt rollouts, AKBE puts one target at full
   * weight), i.e. 1/16 = 0.0625 at the paper's G_wt = 16, "closely matching" 0.05. 'auto' applies
   * that rule anchored at the paper's value: lambda = 0.05 * 16 / G_wt (losses.ts effectiveLambda).
   */
  lambda: number | 'auto';
  /** How L_AKBE averages target tokens: mean over targets of each one's token-mean (paper), or one pooled token-mean. */
  akbeAggregation: AkbeAggregation;
  /** PPO clip epsilon of GRPO and of the clipped AKBE form. Paper: 0.2. */
  clipEps: number;
  /**
   * Dual-clip bound c (> 1): a token with advantage A < 0 costs at most -c·A however large its ratio
   * (Ye et al. 2020). Neither paper writes it; VeRL's `clip_ratio_c` (default 3), which the authors'
   * code runs. null = no dual clip (the paper's plain PPO surrogate).
   */
  dualClip: number | null;
  /**
   * Bound on |log pi - log pi_old| before exp (> 0): an overflow guard, VeRL's ±20, in no paper.
   * null = unclamped (exp may overflow to Inf on a far-off-policy token).
   */
  logRatioClamp: number | null;
  /**
   * How L_GRPO averages its per-token terms (VeRL's loss_agg_mode, src/gpu/losses.ts Aggregation):
   * 'token-mean' (DAPO's form, VeRL's default, ours), 'seq-mean-token-mean' (the paper's 1/|o_i|
   * per trajectory then the mean over trajectories), 'seq-mean-token-sum'.
   */
  lossAgg: LossAggregation;
  /** AdamW learning rate. Paper: not stated (its Table 4 is lost); Search-R1 uses 1e-6 on 3-7B models. */
  lr: number;
  /** Passes over the step's batch. Paper (verl default): 1. */
  ppoEpochs: number;
  /** Advantage estimator name (registry). Paper: 'grpo'. */
  advantage: string;
  /** AKBE loss: token-mean NLL of the target, or a clipped surrogate with advantage +1. */
  akbeLossForm: 'nll' | 'clipped';
  /** Prompt a no-tool target is trained under: the with-tool prompt (teaches "skip the tool") or its own. */
  targetContext: 'with-tool' | 'own';
  /** Tool-dependent target: fewest tool calls (paper) or fewest generated tokens. */
  targetSelection: 'min-tool-calls' | 'shortest';
  /** Run seed: every random draw derives from it. */
  seed: number;
  /** Sampling temperature of rollouts. Paper (verl default): 1.0. */
  temperature: number;
  /** Nucleus sampling threshold. Paper (verl default): 1.0. */
  topP: number;
  /**
   * eta: how many versions a trained rollout may lag behind the version being trained (issue 13).
   * 0 = strictly on-policy, the paper's setting (the default); >= 1: step j rolls out on version
   * max(0, j - eta) while earlier steps train (src/rl/staleness.ts, docs/training.md).
   */
  maxStaleness: number;
  /**
   * The decoupled objective's cap on pi_prox / pi_behav per token (tokens above it are dropped, as
   * AReaL's behav_imp_weight_cap; > 1). Read only when rows can be stale (maxStaleness >= 1).
   */
  behaviourWeightCap: number;
  /**
   * Decode every rollout to the same bits whatever the policy batches it with (src/gpu/row-batches.ts
   * CachedRows): with it (the default) a seed repeats a run bit for bit; without it (a little
   * faster) the logprobs vary at float rounding with the batch, and a draw near a boundary can
   * flip a token. A setting of akbe's own decoder: an external engine batches as it likes, and a
   * run decoding there is not bit-repeatable whatever this says (run.started records the decoder).
   */
  batchInvariantDecode: boolean;
  /**
   * offline-akbe only (required there, refused elsewhere): the frozen checkpoint whose rollouts
   * build each question's target once (src/rl/offline.ts): a checkpoint directory, or
   * `run:<run id>` for the last published checkpoint of that finished run in the same akbe home.
   */
  frozenPolicy?: string;
}

export const DEFAULT_TRAIN_CONFIG: Readonly<TrainConfig> = Object.freeze({
  algo: 'akbe',
  algoOptions: {}, // each algorithm's defaults (docs/algorithms.md)
  steps: 4, // a few minutes on 2 cores; the paper trains ~300 steps
  batchQuestions: 8, // paper 64: one step must fit in about a minute on 2 cores
  miniBatchQuestions: 4, // paper 8: keeps the paper's several updates per step (here 2)
  gWithTool: 8, // paper 16
  gNoTool: 4, // paper 8: keeps the paper's 2:1 ratio
  maxToolCalls: 6, // paper 6; the world's with-tool prompt says "Search up to 6 times" (maxResponseTokens bounds it in practice)
  maxResponseTokens: 256, // paper 6192: the tiny policy's context is short
  lambda: 0.05, // paper 0.05 at its G_wt = 16; configs/*.yaml use 'auto' (0.8 / G_wt: 0.1 at our G_wt = 8)
  akbeAggregation: 'per-target', // paper and the authors' code
  clipEps: 0.2, // paper 0.2
  dualClip: 3, // VeRL clip_ratio_c; the paper writes none
  logRatioClamp: 20, // VeRL's overflow guard; the paper writes none
  lossAgg: 'token-mean', // VeRL default / DAPO; the paper writes a per-sequence 1/|o_i|
  lr: 3e-4, // a ~0.15M-parameter transformer from scratch; paper-scale models use ~1e-6
  ppoEpochs: 1, // paper 1
  advantage: 'grpo', // paper GRPO
  akbeLossForm: 'nll', // paper: cross-entropy
  targetContext: 'with-tool', // DESIGN.md: halves searches on known questions at equal EM in the prototype
  targetSelection: 'min-tool-calls', // paper
  seed: 0,
  temperature: 1.0, // paper 1.0
  topP: 1.0, // paper 1.0
  maxStaleness: 0, // paper: synchronous (0)
  behaviourWeightCap: 5, // AReaL's example configs (behav_imp_weight_cap: 5); unused at maxStaleness 0
  batchInvariantDecode: true, // a seed repeats its run bit for bit (docs/training.md); false: faster, equal to rounding
});

type Check = (v: unknown) => string | null;
const quoted = (names: readonly string[]) => names.map((c) => `'${c}'`).join(', ');
const int =
  (min: number): Check =>
  (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min ? null : `an integer >= ${min}`;
const num =
  (ok: (x: number) => boolean, rule: string): Check =>
  (v) =>
    typeof v === 'number' && Number.isFinite(v) && ok(v) ? null : rule;
const oneOf =
  (...choices: string[]): Check =>
  (v) =>
    typeof v === 'string' && choices.includes(v) ? null : `one of ${choices.map((c) => `'${c}'`).join(', ')}`;

/** A value as the config file meant it: NaN and the infinities by name (JSON would print null). */
function shown(v: unknown): string {
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
  return JSON.stringify(v);
}

const CHECKS: Record<keyof TrainConfig, Check> = {
  algo: (v) =>
    typeof v === 'string' && listAlgorithms().includes(v) ? null : `one of ${quoted(listAlgorithms())}`,
  algoOptions: (v) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? null : 'an object of option: number',
  steps: int(1),
  batchQuestions: int(1),
  miniBatchQuestions: int(1),
  gWithTool: int(1),
  gNoTool: int(0),
  maxToolCalls: int(0),
  maxResponseTokens: int(1),
  lambda: (v) => (v === 'auto' ? null : num((x) => x >= 0, "a number >= 0 or 'auto'")(v)),
  akbeAggregation: oneOf(...AKBE_AGGREGATIONS),
  clipEps: num((x) => x > 0 && x < 1, 'a number in (0, 1)'),
  dualClip: (v) => (v === null ? null : num((x) => x > 1, 'a number > 1 or null')(v)),
  logRatioClamp: (v) => (v === null ? null : num((x) => x > 0, 'a number > 0 or null')(v)),
  lossAgg: oneOf(...LOSS_AGGREGATIONS),
  lr: num((x) => x > 0, 'a number > 0'),
  ppoEpochs: int(1),
  advantage: (v) =>
    typeof v === 'string' && listAdvantages().includes(v) ? null : `one of ${quoted(listAdvantages())}`,
  akbeLossForm: oneOf('nll', 'clipped'),
  targetContext: oneOf('with-tool', 'own'),
  targetSelection: oneOf('min-tool-calls', 'shortest'),
  seed: (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff
      ? null
      : 'an integer in [0, 2^32)',
  temperature: num((x) => x > 0, 'a number > 0'),
  topP: num((x) => x > 0 && x <= 1, 'a number in (0, 1]'),
  maxStaleness: int(0),
  behaviourWeightCap: num((x) => x > 1, 'a number > 1'),
  batchInvariantDecode: (v) => (typeof v === 'boolean' ? null : 'true or false'),
  frozenPolicy: (v) =>
    v === undefined || (typeof v === 'string' && v !== '')
      ? null
      : "a checkpoint directory or 'run:<run id>' (a non-empty string)",
};

/**
 * Validates a parsed config file (any subset of TrainConfig) and fills in the defaults. Throws a
 * ConfigError naming the first bad key: `config.lambda must be a number >= 0, got "x"`.
 */
export function validateTrainConfig(obj: unknown): TrainConfig {
  if (obj === null || obj === undefined) return { ...DEFAULT_TRAIN_CONFIG };
  if (typeof obj !== 'object' || Array.isArray(obj))
    throw new ConfigError('', `config must be an object of settings, got ${JSON.stringify(obj)}`);
  const given = obj as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!(key in CHECKS))
      throw new ConfigError(
        key,
        `config.${key} is not a known setting; known: ${Object.keys(CHECKS).join(', ')}`,
      );
  }
  const cfg = { ...DEFAULT_TRAIN_CONFIG, ...given } as TrainConfig;
  for (const key of Object.keys(CHECKS) as (keyof TrainConfig)[]) {
    const rule = CHECKS[key](cfg[key]);
    if (rule) throw new ConfigError(key, `config.${key} must be ${rule}, got ${shown(cfg[key])}`);
  }
  if (cfg.gWithTool < 2) {
    throw new ConfigError(
      'gWithTool',
      `config.gWithTool must be >= 2: GRPO compares a question's with-tool rollouts within their group (advantage (r - mean) / std), so a group of one learns nothing, got ${cfg.gWithTool}`,
    );
  }
  if (cfg.miniBatchQuestions > cfg.batchQuestions) {
    throw new ConfigError(
      'miniBatchQuestions',
      `config.miniBatchQuestions must be <= config.batchQuestions (${cfg.batchQuestions}), got ${cfg.miniBatchQuestions}`,
    );
  }
  if (getAlgorithm(cfg.algo).needsNoTool && cfg.gNoTool === 0) {
    throw new ConfigError(
      'gNoTool',
      `config.gNoTool must be >= 1 when config.algo is '${cfg.algo}' (the no-tool probe labels the boundary), got 0`,
    );
  }
  const offline = getAlgorithm(cfg.algo).offlineTargets === true;
  if (offline && cfg.frozenPolicy === undefined)
    throw new ConfigError(
      'frozenPolicy',
      `config.frozenPolicy is required when config.algo is '${cfg.algo}': the frozen checkpoint whose rollouts build the offline targets (a checkpoint directory, or 'run:<run id>' for that finished run's last checkpoint)`,
    );
  if (!offline && cfg.frozenPolicy !== undefined)
    throw new ConfigError(
      'frozenPolicy',
      `config.frozenPolicy is only for offline-akbe (a frozen checkpoint's targets); config.algo '${cfg.algo}' does not read it, got ${shown(cfg.frozenPolicy)}`,
    );
  cfg.algoOptions = algorithmOptions(getAlgorithm(cfg.algo), cfg.algoOptions);
  return cfg;
}
