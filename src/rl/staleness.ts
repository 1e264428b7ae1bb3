/**
 * Bounded staleness (issue 13, docs/training.md): which policy version rolls out a step and which
 * one trains it, for `maxStaleness` η. Steps train in order, step j from version base + j (it
 * publishes base + j + 1); step j rolls out with version base + max(0, j - η), the newest version
 * published when it may open. So step j's rows are min(j, η) versions older than the version
 * trained from, and η = 0 is the synchronous loop. `base` is the run's first version (0). Pure.
 */

/** The version that rolls out step `step`'s questions (both paths of each). */
export function rolloutVersionOf(step: number, maxStaleness: number, base = 0): number {
  return base + Math.max(0, step - maxStaleness);
}

/** The version step `step` trains from (its pi_prox; it publishes this + 1). */
export function trainVersionOf(step: number, base = 0): number {
  return base + step;
}
