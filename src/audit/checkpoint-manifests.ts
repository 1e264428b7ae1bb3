/**
 * Checkpoint manifests (policy.published v2): each recorded manifestSha256 must be the digest of
 * the recorded manifest (src/events/train-digest.ts), and, when the run's checkpoint directories
 * are on disk (`<runDir>/checkpoints/v<k>/`), the digest of the files there (every plain file but
 * an atomic write's temporary `.<name>…tmp`). A v1 log recorded no manifest: a note says so.
 * A version pruned (keepCheckpoints) or not on this machine is not checked against disk.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventOf } from '../events/catalog.js';
import { manifestDigest, manifestOf } from '../events/train-digest.js';
import type { Collector } from './collector.js';

/** The manifest digest of a version directory's files, as publish() computed it. */
export function diskManifestDigest(dir: string): string {
  const files = new Map<string, Uint8Array>();
  for (const e of readdirSync(dir, { withFileTypes: true }))
    if (e.isFile() && !(e.name.startsWith('.') && e.name.endsWith('.tmp')))
      files.set(e.name, new Uint8Array(readFileSync(join(dir, e.name))));
  return manifestDigest(manifestOf(files));
}

export function checkManifests(
  c: Collector,
  published: ReadonlyMap<number, EventOf<'policy.published'>>,
  checkpointsDir?: string,
): void {
  for (const [version, e] of published) {
    const { manifest, manifestSha256 } = e.data;
    const where = { seq: e.meta.seq ?? 0, eventType: 'policy.published', step: e.meta.step };
    if (!manifest || !manifestSha256) {
      c.notes.add('checkpoint manifests: not supported by this log (recorded from policy.published v2)');
      continue;
    }
    c.check(where, 'manifestSha256', manifestSha256, manifestDigest(manifest));
    c.check(where, 'manifest["model.safetensors"]', manifest['model.safetensors'], e.data.sha256);
    const dir = checkpointsDir && join(checkpointsDir, `v${version}`);
    if (dir && existsSync(dir)) {
      c.check(
        where,
        `checkpoint files of v${version} (manifest digest)`,
        manifestSha256,
        diskManifestDigest(dir),
      );
    }
  }
}
