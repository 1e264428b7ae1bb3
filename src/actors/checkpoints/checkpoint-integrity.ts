/**
 * Is a local checkpoint directory intact?
 *
 * - With a manifest recorded (policy.published v2: every file of the checkpoint directory and its
 *   sha256, src/events/train-digest.ts): every file against it. A missing file, a file not in the
 *   manifest, or a file whose sha256 differs is named, with both sha256s and the version.
 * - Without one (a v1 log, or v0 whose run.started records the weights' sha256 only): its weights
 *   against the sha256 the log recorded (or, with none recorded, parsed as safetensors), its
 *   config.json parsed, and its AdamW state as long as its header says.
 *
 * checkpoints.ts falls back to the stored copy when the local one is not intact, and checks the
 * stored copy the same way before it writes anything.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open, readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { type Manifest, manifestOf } from '../../events/train-digest.js';
import { decodeSafetensors } from '../../gpu/safetensors.js';

/** What the log recorded for a version's checkpoint. */
export interface RecordedCheckpoint {
  /** sha256 of model.safetensors. */
  sha256: string;
  /**
   * Every file's sha256 (policy.published v2). null: the log's policy.published predates
   * manifests (v1), so only the weights can be checked; undefined: not a policy.published (v0).
   */
  manifest?: Manifest | null;
}

/** Temporary files of an atomic write (`.<name>.<pid>[.<hex>].tmp`): never part of a checkpoint. */
export const isTemporary = (name: string) => name.startsWith('.') && name.endsWith('.tmp');

/** Every plain file of a directory by name (not recursive), with its bytes. */
export async function readCheckpointFiles(dir: string): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  const entries = await readdir(dir, { withFileTypes: true });
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)))
    if (e.isFile()) files.set(e.name, new Uint8Array(await readFile(join(dir, e.name))));
  return files;
}

const short = (sha: string) => `${sha.slice(0, 12)}…`;

/**
 * What is wrong with a checkpoint's files against its recorded manifest (each problem names the
 * file, the sha256 expected and found, and the version), or [] when every file is as recorded.
 */
export function manifestProblems(version: number, recorded: Manifest, actual: Manifest): string[] {
  const problems: string[] = [];
  const names = [...new Set([...Object.keys(recorded), ...Object.keys(actual)])].sort();
  for (const name of names) {
    const want = recorded[name];
    const got = actual[name];
    if (want === undefined)
      problems.push(
        `${name} (sha256 ${short(got)}) is not in the manifest policy.published recorded for v${version}`,
      );
    else if (got === undefined)
      problems.push(`${name} is missing (the manifest of v${version} records sha256 ${short(want)})`);
    else if (got !== want)
      problems.push(`${name} has sha256 ${short(got)}, the manifest of v${version} records ${short(want)}`);
  }
  return problems;
}

/** The note for a version whose log recorded no manifest (said once per version by checkpoints.ts). */
export function noManifestNote(version: number): string {
  return `checkpoint v${version}: manifest check not supported by this log (its policy.published v1 records no manifest); checking model.safetensors only`;
}

/** What is wrong with a local version directory against the log's record, or null when it is intact. */
export async function checkpointProblem(
  dir: string,
  version: number,
  recorded: RecordedCheckpoint | undefined,
): Promise<string | null> {
  if (recorded?.manifest) {
    const problems = manifestProblems(version, recorded.manifest, manifestOf(await readCheckpointFiles(dir)));
    return problems.length ? problems.join('; ') : null;
  }
  return localProblem(dir, recorded?.sha256);
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** What is wrong with a local version directory's weights, or null when they are intact. */
export async function localProblem(dir: string, expected: string | undefined): Promise<string | null> {
  const path = join(dir, 'model.safetensors');
  try {
    JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
  } catch (err) {
    return `config.json: ${(err as Error).message}`;
  }
  // The AdamW state has no recorded sha256: a truncated write shows as a length its header disowns.
  const optimizer = join(dir, 'optimizer.safetensors');
  const cut = existsSync(optimizer) ? await truncation(optimizer) : null;
  if (cut) return cut;
  const bytes = new Uint8Array(await readFile(path));
  if (expected) {
    const actual = sha256Hex(bytes);
    return actual === expected
      ? null
      : `model.safetensors has sha256 ${actual.slice(0, 16)}…, the log recorded ${expected.slice(0, 16)}…`;
  }
  try {
    decodeSafetensors(bytes, path);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Why a safetensors file is not as long as its header says (a cut write), or null. Reads the header only. */
async function truncation(path: string): Promise<string | null> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    const head = Buffer.alloc(8);
    if (size < 8 || (await file.read(head, 0, 8, 0)).bytesRead < 8)
      return `${basename(path)} is ${size} bytes, shorter than a safetensors header`;
    const headerLen = Number(head.readBigUInt64LE(0));
    if (8 + headerLen > size)
      return `${basename(path)} is ${size} bytes, its header alone claims ${headerLen}`;
    const json = Buffer.alloc(headerLen);
    await file.read(json, 0, headerLen, 8);
    const header = JSON.parse(json.toString('utf8')) as Record<string, { data_offsets?: [number, number] }>;
    let end = 0;
    for (const [name, t] of Object.entries(header))
      if (name !== '__metadata__') end = Math.max(end, t.data_offsets?.[1] ?? 0);
    const want = 8 + headerLen + end;
    return want === size ? null : `${basename(path)} is ${size} bytes, its header says ${want}`;
  } catch (err) {
    return `${basename(path)}: ${(err as Error).message}`;
  } finally {
    await file.close();
  }
}
