/** How many policy versions a run keeps (its config's `keepCheckpoints`), and which counts are valid. */

/**
 * Versions a run keeps (`keepCheckpoints`), locally and in the object store: the newest N, plus v0
 * (the base: each version's tokenizer files are copied from it). 5 keeps every version of the
 * default config's 4-step run, and bounds a long run of a large model (a Qwen3-4B version with its
 * AdamW state is ~40 GB). 0 keeps every version.
 */
export const DEFAULT_KEEP_CHECKPOINTS = 5;

/**
 * Why `keep` is not a valid keepCheckpoints, or null. At least 2: after version k+1 is published,
 * version k still serves the step's last rollouts on a worker and is what a resume needs if the
 * orchestrator dies before policy.published(k+1) is stored.
 */
export function keepCheckpointsProblem(keep: unknown, maxStaleness = 0): string | null {
  const least = Math.max(2, maxStaleness + 1);
  if (typeof keep === 'number' && Number.isInteger(keep) && (keep === 0 || keep >= least)) return null;
  if (least > 2)
    return `config.keepCheckpoints must be 0 (keep every version) or an integer >= maxStaleness + 1 = ${least} (the versions rollouts may still run on), got ${JSON.stringify(keep)}`;
  return `config.keepCheckpoints must be 0 (keep every version) or an integer >= 2 (the newest version and the one before it, which a worker may still serve and a resume may need), got ${JSON.stringify(keep)}`;
}
