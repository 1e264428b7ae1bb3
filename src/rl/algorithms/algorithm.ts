/**
 * Algorithms as registered, named entries (house rule 10): one registry for what distinguishes
 * GRPO, AKBE and the reward-shaping baselines. An algorithm says
 *   - how a question's with-tool rollouts are rewarded for the advantage estimator (`rewards`:
 *     the EM reward, or a shaping of it such as OTC-PO's tool-productivity reward),
 *   - whether the learner trains AKBE targets from the boundary labels (`akbeTargets`) and needs
 *     the no-tool probe for them (`needsNoTool`),
 *   - the rows its batch trains beyond the with-tool rollouts (`rowKinds`, names from the row-kind
 *     registry, src/rl/row-kinds.ts; by default the ones its flags say),
 *   - its loss terms (`losses`, names from the loss registry, src/rl/losses.ts),
 *   - its options (`options`: defaults, set in a run's config under `algoOptions`).
 * The learner, the trainer's loss terms and the audit read only this entry, so an algorithm's
 * rewards and advantages are recomputed by `akbe replay` like AKBE's.
 *
 * Adding one: a file in this folder calling `registerAlgorithm`, and its import in index.ts.
 */
import { ConfigError } from '../errors.js';
import type { LossTerm } from '../losses.js';
import { NamedRegistry } from '../registry.js';
import { getRowKind } from '../row-kinds.js';
import type { RolloutResult } from '../types.js';

/** What an algorithm's loss terms are built from (a TrainConfig has all of it). */
export interface LossConfig {
  akbeLossForm: 'nll' | 'clipped';
  lambda: number | 'auto';
  /** Needed only for `lambda: auto`. */
  gWithTool?: number;
  clipEps: number;
  /** The run's algoOptions (an algorithm whose loss takes one of its options reads it here). */
  algoOptions?: Readonly<Record<string, unknown>>;
}

/** What an algorithm registers: its rewards, whether it trains AKBE targets and needs the no-tool probe, its loss terms and options (docs/algorithms.md). */
export interface Algorithm {
  name: string;
  description: string;
  /** Where its definition comes from (paper, section, code). */
  source: string;
  /** The learner adds each labelled question's AKBE target to the batch (lambda * L_AKBE). */
  akbeTargets: boolean;
  /**
   * The targets are the chosen side of DPO pairs (src/rl/dpo.ts) rather than L_AKBE's: the learner
   * picks each question's rejected rollout and the batch carries the pairs (needs akbeTargets).
   */
  dpoPairs?: boolean;
  /**
   * Offline AKBE: L_AKBE trains each question's target constructed once from a frozen checkpoint's
   * rollouts (src/rl/offline.ts, config `frozenPolicy`) instead of the on-policy labels' targets
   * (akbeTargets false: the on-policy labels are still measured and recorded).
   */
  offlineTargets?: boolean;
  /** Needs the no-tool rollouts (G_nt >= 1) to train. */
  needsNoTool: boolean;
  /**
   * The row kinds its batch adds to the with-tool rows (src/rl/row-kinds.ts), in order. Default
   * (rowKindsOf): 'dpo-pair' with dpoPairs, 'offline-target' with offlineTargets, 'akbe-target'
   * with akbeTargets, else none.
   */
  rowKinds?: readonly string[];
  /** Option names and their defaults (config `algoOptions`). */
  options: Readonly<Record<string, number>>;
  /** Throws a RangeError naming the option when a value is out of range. */
  validateOptions?(opts: Readonly<Record<string, number>>): void;
  /**
   * The rewards [G] of one question's with-tool rollouts [G] that the advantage estimator sees.
   * Pure and deterministic: the audit recomputes them from the log.
   */
  rewards(withTool: readonly RolloutResult[], opts: Readonly<Record<string, number>>): number[];
  /** The loss terms (validated by the caller). */
  losses(cfg: LossConfig): LossTerm[];
}

const ALGORITHMS = new NamedRegistry<Algorithm>('algorithm');

/**
 * Registers an algorithm after checking what its flags imply, so that a new entry cannot train
 * something its name does not say: DPO pairs are built on the AKBE targets, and AKBE targets
 * (on-policy or offline) on boundary labels, which need the no-tool probe. Every entry cites where
 * its definition comes from.
 */
export function registerAlgorithm(a: Algorithm): void {
  const refuse = (why: string) => {
    throw new TypeError(`algorithm '${a.name}': ${why}`);
  };
  if (a.description.trim() === '') refuse('description is empty');
  if (a.source.trim() === '') refuse('source is empty (cite the paper, section or code it implements)');
  if (a.dpoPairs && !a.akbeTargets) refuse('dpoPairs needs akbeTargets (the chosen side is the AKBE target)');
  if ((a.akbeTargets || a.offlineTargets) && !a.needsNoTool)
    refuse('AKBE targets need the boundary labels, so needsNoTool must be true');
  for (const kind of a.rowKinds ?? []) getRowKind(kind); // an unknown kind throws, naming the known ones
  ALGORITHMS.register(a.name, a);
}

/** The row kinds an algorithm's batch adds to its with-tool rows (Algorithm.rowKinds, or its flags'). */
export function rowKindsOf(a: Algorithm): readonly string[] {
  if (a.rowKinds) return a.rowKinds;
  if (a.dpoPairs) return ['dpo-pair'];
  if (a.offlineTargets) return ['offline-target'];
  return a.akbeTargets ? ['akbe-target'] : [];
}
/** The algorithm registered under `name` (`algo:` in a config); throws naming the registered ones. */
export const getAlgorithm = (name: string): Algorithm => ALGORITHMS.get(name);
/** The names of every registered algorithm. */
export const listAlgorithms = (): string[] => ALGORITHMS.names();

/** The base method the others are measured against (an experiment's default baseline cell): GRPO. */
export const isBaseAlgorithm = (name: string): boolean => name === 'grpo';

/** The outcome reward as the rollout machine scored it: EM with the format rule. */
export const outcomeRewards = (withTool: readonly RolloutResult[]): number[] => withTool.map((r) => r.reward);

/**
 * An algorithm's options: its defaults overlaid with the given ones. An unknown key or a value
 * that is not a finite number throws a ConfigError naming `algoOptions.<key>`.
 */
export function algorithmOptions(
  a: Algorithm,
  given: Readonly<Record<string, unknown>> = {},
): Record<string, number> {
  const known = Object.keys(a.options);
  for (const [key, v] of Object.entries(given)) {
    if (!known.includes(key))
      throw new ConfigError(
        'algoOptions',
        `config.algoOptions.${key} is not an option of algo '${a.name}'; its options: ${known.join(', ') || 'none'}`,
      );
    if (!Number.isFinite(v))
      // false for every non-number too
      throw new ConfigError(
        'algoOptions',
        `config.algoOptions.${key} must be a number, got ${JSON.stringify(v)}`,
      );
  }
  const opts = { ...a.options, ...(given as Record<string, number>) };
  try {
    a.validateOptions?.(opts);
  } catch (err) {
    throw new ConfigError('algoOptions', `config.algoOptions: ${(err as Error).message}`);
  }
  return opts;
}
