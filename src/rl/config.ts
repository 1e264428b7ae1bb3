/**
 * The training config: every hyperparameter of a run, typed, with a default scaled to this
 * machine (2 CPU cores, a ~4M-parameter policy, a synthetic world) and the paper's value
 * (AKBE, Qwen3-4B on 8×H20, appendix A) beside it. A config file overrides any subset; an
 * unknown key or a bad value throws a ConfigError that names the key.
 */
import { listAdvantages } from './advantages.js';
import { ConfigError } from './errors.js';

export interface TrainConfig {
  /** 'akbe' = GRPO + lambda·L_AKBE; 'grpo' = the base method alone. */
  algo: 'grpo' | 'akbe';
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
  /** AKBE coefficient. Paper: 0.05 (≈ 1/G_wt; §B). */
  lambda: number;
  /** PPO clip epsilon of GRPO and of the clipped AKBE form. Paper: 0.2. */
  clipEps: number;
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
}

export const DEFAULT_TRAIN_CONFIG: Readonly<TrainConfig> = Object.freeze({
  algo: 'akbe',
  steps: 4, // a few minutes on 2 cores; the paper trains ~300 steps
  batchQuestions: 8, // paper 64: one step must fit in about a minute on 2 cores
  miniBatchQuestions: 4, // paper 8: keeps the paper's several updates per step (here 2)
  gWithTool: 8, // paper 16
  gNoTool: 4, // paper 8: keeps the paper's 2:1 ratio
  maxToolCalls: 6, // paper 6; the world's with-tool prompt says "Search up to 6 times" (maxResponseTokens bounds it in practice)
  maxResponseTokens: 256, // paper 6192: the tiny policy's context is short
  lambda: 0.05, // paper 0.05
  clipEps: 0.2, // paper 0.2
  lr: 3e-4, // a 4M-parameter transformer; paper-scale models use ~1e-6
  ppoEpochs: 1, // paper 1
  advantage: 'grpo', // paper GRPO
  akbeLossForm: 'nll', // paper: cross-entropy
  targetContext: 'with-tool', // DESIGN.md: halves searches on known questions at equal EM in the prototype
  targetSelection: 'min-tool-calls', // paper
  seed: 0,
  temperature: 1.0, // paper 1.0
  topP: 1.0, // paper 1.0
});

type Check = (v: unknown) => string | null;
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

const CHECKS: Record<keyof TrainConfig, Check> = {
  algo: oneOf('grpo', 'akbe'),
  steps: int(1),
  batchQuestions: int(1),
  miniBatchQuestions: int(1),
  gWithTool: int(1),
  gNoTool: int(0),
  maxToolCalls: int(0),
  maxResponseTokens: int(1),
  lambda: num((x) => x >= 0, 'a number >= 0'),
  clipEps: num((x) => x > 0 && x < 1, 'a number in (0, 1)'),
  lr: num((x) => x > 0, 'a number > 0'),
  ppoEpochs: int(1),
  advantage: (v) =>
    typeof v === 'string' && listAdvantages().includes(v)
      ? null
      : `one of ${listAdvantages()
          .map((c) => `'${c}'`)
          .join(', ')}`,
  akbeLossForm: oneOf('nll', 'clipped'),
  targetContext: oneOf('with-tool', 'own'),
  targetSelection: oneOf('min-tool-calls', 'shortest'),
  seed: (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff
      ? null
      : 'an integer in [0, 2^32)',
  temperature: num((x) => x > 0, 'a number > 0'),
  topP: num((x) => x > 0 && x <= 1, 'a number in (0, 1]'),
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
    if (rule) throw new ConfigError(key, `config.${key} must be ${rule}, got ${JSON.stringify(cfg[key])}`);
  }
  if (cfg.miniBatchQuestions > cfg.batchQuestions) {
    throw new ConfigError(
      'miniBatchQuestions',
      `config.miniBatchQuestions must be <= config.batchQuestions (${cfg.batchQuestions}), got ${cfg.miniBatchQuestions}`,
    );
  }
  if (cfg.algo === 'akbe' && cfg.gNoTool === 0) {
    throw new ConfigError(
      'gNoTool',
      "config.gNoTool must be >= 1 when config.algo is 'akbe' (the no-tool probe labels the boundary), got 0",
    );
  }
  return cfg;
}
