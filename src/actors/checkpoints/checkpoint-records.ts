/**
 * What a run's log records about its checkpoints, for a process that does not fold the log itself
 * (`akbe worker`): CheckpointStore's `recorded` lookup.
 */
import type { EventStore } from '../../events/store.js';
import type { Manifest } from '../../events/train-digest.js';
import type { RecordedCheckpoint } from './checkpoint-integrity.js';

/**
 * The base's manifest as run.started.config records it (`basePolicyManifest`), or null when the
 * log has none (a run started before v0's manifest was recorded) or it is not { file: sha256 }.
 */
export function baseManifestOf(config: { [key: string]: unknown } | undefined): Manifest | null {
  const m = config?.basePolicyManifest;
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return null;
  const entries = Object.entries(m);
  if (entries.length === 0 || !entries.every(([, v]) => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v)))
    return null;
  return Object.fromEntries(entries) as Manifest;
}

/**
 * The sha256 a run's log records for a version (a worker's `recorded` lookup): run.started's
 * `basePolicySha256` (and `basePolicyManifest`) for v0, policy.published for the others. A version just trained may be asked
 * for a moment before its policy.published is stored: the lookup waits up to `waitMs` for it, then
 * says so and answers undefined (the copy is then checked for its format only). policy.published v2
 * also records the checkpoint's manifest (every file's sha256); a v1 one answers manifest null.
 */
export function recordedInLog(
  store: EventStore,
  runId: string,
  opts: { waitMs?: number; log?: (line: string) => void } = {},
): (version: number) => Promise<RecordedCheckpoint | undefined> {
  return async (version) => {
    if (version === 0) {
      for await (const { event } of store.replayType(runId, 'run.started')) {
        const sha = event.data.config.basePolicySha256;
        return typeof sha === 'string'
          ? { sha256: sha, manifest: baseManifestOf(event.data.config) }
          : undefined;
      }
      return undefined;
    }
    const deadline = Date.now() + (opts.waitMs ?? 30_000);
    for (;;) {
      for await (const { event } of store.replayType(runId, 'policy.published'))
        if (event.data.version === version)
          return { sha256: event.data.sha256, manifest: event.data.manifest ?? null };
      if (Date.now() >= deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    opts.log?.(
      `run ${runId}: no policy.published for v${version} in the log; checking its checkpoint's format only`,
    );
    return undefined;
  };
}
