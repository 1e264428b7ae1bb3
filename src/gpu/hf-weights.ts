/**
 * The weights files of a Hugging Face checkpoint directory, either layout transformers and vLLM
 * read:
 *
 *   dir/model.safetensors                      every tensor in one file, or
 *   dir/model.safetensors.index.json           {"metadata": {"total_size": N}, "weight_map": {name: shard}}
 *   dir/model-00001-of-00003.safetensors ...   the shards it names
 *
 * Like `from_pretrained`, a directory with model.safetensors uses it and ignores any index.
 * Tensors are written F32, BF16 or F16; every write goes to a temporary file renamed into place,
 * and files of the other layout are removed only after the new ones are complete.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import {
  decodeSafetensors,
  encodeSafetensors,
  float32ToBf16,
  float32ToF16,
  type SafetensorsFile,
  type SafetensorsTensor,
} from './safetensors.js';

export const MODEL_FILE = 'model.safetensors';
export const INDEX_FILE = 'model.safetensors.index.json';
const SHARD_NAME = /^model-\d{5}-of-\d{5}\.safetensors$/;

/** The element types a checkpoint can be saved in. */
export const SAVE_DTYPES = ['F32', 'BF16', 'F16'] as const;
export type SaveDtype = (typeof SAVE_DTYPES)[number];

/** config.json's `torch_dtype` for each saved element type. */
export const TORCH_DTYPE: Record<SaveDtype, string> = { F32: 'float32', BF16: 'bfloat16', F16: 'float16' };

/** A checkpoint file that is missing or unusable; the message names the file and the problem. */
export class CheckpointError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: ${problem}`, options);
    this.name = 'CheckpointError';
  }
}

/** Writes `bytes` to `path` atomically: temp file in the same directory, then rename. */
export async function writeFileAtomic(path: string, bytes: Uint8Array | string): Promise<void> {
  const tmp = join(path, '..', `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, bytes, { flush: true });
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

export async function readOrFail(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? `missing (${what})` : `cannot be read (${(e as Error).message})`;
    throw new CheckpointError(path, why, { cause: e });
  }
}

export function decodeOrFail(bytes: Uint8Array, path: string): SafetensorsFile {
  try {
    return decodeSafetensors(bytes, path);
  } catch (e) {
    throw new CheckpointError(path, (e as Error).message.replace(`${path}: `, ''), { cause: e });
  }
}

export interface Weights {
  tensors: Map<string, SafetensorsTensor>;
  /** `__metadata__` of model.safetensors (of the first shard when sharded). */
  metadata: Record<string, string>;
  /** The file each tensor came from (for error messages). */
  fileOf: (name: string) => string;
}

/** Reads model.safetensors, or else every shard model.safetensors.index.json names. */
export async function readWeights(dir: string): Promise<Weights> {
  const single = join(dir, MODEL_FILE);
  const indexPath = join(dir, INDEX_FILE);
  let bytes: Buffer | undefined;
  try {
    bytes = await readFile(single);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new CheckpointError(single, `cannot be read (${(e as Error).message})`, { cause: e });
  }
  if (bytes) {
    const file = decodeOrFail(bytes, single);
    return { tensors: file.tensors, metadata: file.metadata, fileOf: () => single };
  }
  const indexText = await readOrFail(
    indexPath,
    `a checkpoint directory needs ${MODEL_FILE} or a sharded ${INDEX_FILE}`,
  ).catch((e: CheckpointError) => {
    throw new CheckpointError(single, `missing, and so is ${INDEX_FILE} (the weights of the checkpoint)`, {
      cause: e,
    });
  });
  let weightMap: Record<string, unknown>;
  try {
    weightMap = (JSON.parse(indexText.toString('utf8')) as { weight_map: Record<string, unknown> })
      .weight_map;
    if (typeof weightMap !== 'object' || weightMap === null) throw new Error('no "weight_map" object');
  } catch (e) {
    throw new CheckpointError(indexPath, `bad index (${(e as Error).message})`, { cause: e });
  }
  const shards = [...new Set(Object.values(weightMap))];
  const bad = shards.find((s) => typeof s !== 'string' || s.includes('/') || s.includes('\\'));
  if (bad !== undefined)
    throw new CheckpointError(indexPath, `weight_map names ${JSON.stringify(bad)}, not a file in ${dir}`);
  const tensors = new Map<string, SafetensorsTensor>();
  const from = new Map<string, string>();
  let metadata: Record<string, string> = {};
  for (const [k, shard] of (shards as string[]).entries()) {
    const path = join(dir, shard);
    const file = decodeOrFail(await readOrFail(path, `a shard named by ${INDEX_FILE}`), path);
    if (k === 0) metadata = file.metadata;
    for (const [name, t] of file.tensors) {
      if (weightMap[name] !== shard)
        throw new CheckpointError(
          path,
          `holds ${name}, which ${INDEX_FILE} maps to ${weightMap[name] ?? 'nothing'}`,
        );
      tensors.set(name, t);
      from.set(name, path);
    }
  }
  const lost = Object.keys(weightMap).find((n) => !tensors.has(n));
  if (lost)
    throw new CheckpointError(
      join(dir, weightMap[lost] as string),
      `lacks ${lost}, which ${INDEX_FILE} maps to it`,
    );
  return { tensors, metadata, fileOf: (n) => from.get(n) ?? indexPath };
}

export interface WriteWeightsOptions {
  dtype?: SaveDtype;
  /** Start a new shard before a file would pass this many bytes (default: one file). */
  maxShardBytes?: number;
  metadata?: Record<string, string>;
}

type Entry = [string, { shape: number[]; data: Float32Array }];

function encoded(entries: Entry[], dtype: SaveDtype, metadata: Record<string, string>): Uint8Array {
  const convert = dtype === 'BF16' ? float32ToBf16 : dtype === 'F16' ? float32ToF16 : undefined;
  return encodeSafetensors(
    entries.map(([name, t]) => [name, convert ? { shape: t.shape, data: convert(t.data), dtype } : t]),
    metadata,
  );
}

/** Writes float32 tensors as one model.safetensors or as shards plus their index. */
export async function writeWeights(
  dir: string,
  entries: Entry[],
  opts: WriteWeightsOptions = {},
): Promise<void> {
  const dtype = opts.dtype ?? 'F32';
  const metadata = { ...opts.metadata, format: 'pt' };
  const bytesPer = dtype === 'F32' ? 4 : 2;
  const shards: Entry[][] = [[]];
  let size = 0;
  for (const e of entries) {
    const n = e[1].data.length * bytesPer;
    if (opts.maxShardBytes && size > 0 && size + n > opts.maxShardBytes) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1].push(e);
    size += n;
  }
  const old = await readdir(dir);
  if (shards.length === 1) {
    await writeFileAtomic(join(dir, MODEL_FILE), encoded(entries, dtype, metadata));
    for (const f of old) if (f === INDEX_FILE || SHARD_NAME.test(f)) await rm(join(dir, f), { force: true });
    return;
  }
  const pad = (i: number) => String(i).padStart(5, '0');
  const names = shards.map((_, i) => `model-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`);
  const weightMap: Record<string, string> = {};
  for (const [i, shard] of shards.entries()) {
    await writeFileAtomic(join(dir, names[i]), encoded(shard, dtype, metadata));
    for (const [name] of shard) weightMap[name] = names[i];
  }
  const total = entries.reduce((n, e) => n + e[1].data.length * bytesPer, 0);
  const index = { metadata: { total_size: total }, weight_map: weightMap };
  await writeFileAtomic(join(dir, INDEX_FILE), `${JSON.stringify(index, null, 2)}\n`);
  for (const f of old)
    if (f === MODEL_FILE || (SHARD_NAME.test(f) && !names.includes(f)))
      await rm(join(dir, f), { force: true });
}
