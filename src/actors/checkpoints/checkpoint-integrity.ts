/**
 * Is a local checkpoint directory intact? Its weights against the sha256 the log recorded (or,
 * with none recorded, parsed as safetensors), its config.json parsed, and its AdamW state as long
 * as its header says (checkpoints.ts falls back to the stored copy when not).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { decodeSafetensors } from '../../gpu/safetensors.js';

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
