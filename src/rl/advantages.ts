/**
 * Advantage estimators, registered by name (house rule 10, after verl's core_algos): the config
 * holds only a name, a duplicate registration throws, an unknown name lists the valid ones.
 *
 * An estimator maps the outcome rewards of ONE group (the G_wt with-tool rollouts of a question) to
 * one advantage per rollout, broadcast over the rollout's generated tokens by the trainer.
 */
import { NamedRegistry } from './registry.js';

/** rewards [G] -> advantages [G]. */
export type AdvantageFn = (rewards: readonly number[]) => number[];

/** Built-in names; plain strings extend the set through `registerAdvantage`. */
export const AdvantageName = { GRPO: 'grpo', DR_GRPO: 'dr-grpo' } as const;

const ADVANTAGES = new NamedRegistry<AdvantageFn>('advantage');
/** Registers an advantage estimator (one question's rewards -> advantages) under `name`. */
export const registerAdvantage = (name: string, fn: AdvantageFn): void => ADVANTAGES.register(name, fn);
/** The advantage estimator registered under `name` (`advantage:` in a config); throws naming the registered ones. */
export const getAdvantage = (name: string): AdvantageFn => ADVANTAGES.get(name);
export const listAdvantages = (): string[] => ADVANTAGES.names();

/** Group-normalisation epsilon of verl's GRPO estimator. */
export const GRPO_EPSILON = 1e-6;

/**
 * GRPO (Shao et al. 2024, https://arxiv.org/abs/2402.03300): A_i = (R_i - mean) / (std + 1e-6),
 * std with ddof = 1 (torch.std's default, verl's choice). A group of one has no baseline: 0, as verl
 * sets mean 0 and std 1 for it. A group with equal rewards gets all zeros.
 */
export function grpoAdvantages(rewards: readonly number[]): number[] {
  const n = rewards.length;
  if (n <= 1) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const variance = rewards.reduce((a, r) => a + (r - mean) * (r - mean), 0) / (n - 1);
  const std = Math.sqrt(variance);
  return rewards.map((r) => (r - mean) / (std + GRPO_EPSILON));
}

/**
 * Dr. GRPO (Liu et al. 2025, https://arxiv.org/abs/2503.20783): A_i = R_i - mean, no division by
 * std (which up-weights near-uniform groups). A group of one gets 0.
 */
export function drGrpoAdvantages(rewards: readonly number[]): number[] {
  const n = rewards.length;
  if (n <= 1) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  return rewards.map((r) => r - mean);
}

registerAdvantage(AdvantageName.GRPO, grpoAdvantages);
registerAdvantage(AdvantageName.DR_GRPO, drGrpoAdvantages);
