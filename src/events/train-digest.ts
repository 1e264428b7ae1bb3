/**
 * Canonical digests: of a train request (what the learner sent, what the trainer trained on) and
 * of a checkpoint's files (its manifest). learner.step and policy.published record them, so the
 * audit can tell a trainer that trained on anything but the learner's request (issue 22/23).
 *
 * Canonical bytes of a train request (version 1), hashed with sha256, lowercase hex:
 *
 *   "akbe-train-request/1\n"
 *   "meta " + cjson(meta) + "\n"
 *   for each tensor of TENSORS, in that order, when present:
 *     "tensor <name> <dtype> <dim0>x<dim1>... <byteLength>\n" + the tensor's raw bytes (little-endian)
 *
 * meta = { runId, step, policyVersion, lr, epochs, rowsPerUpdate, padId, losses, rows, T,
 *          lossTokens, rowInfo, miniBatches, dpoPairs? }. cjson is JSON with every object's keys
 * sorted by UTF-16 code unit, no whitespace, undefined members left out, numbers as
 * JSON.stringify writes them (ECMAScript's shortest round-trip form). So the digest does not
 * depend on key order, and any change of a token, weight or hyperparameter changes it.
 *
 * A manifest is { file -> sha256 of its bytes }; its digest is sha256 of
 * "akbe-manifest/1\n" + for each file sorted by name: "<name> <sha256>\n".
 */
import { createHash } from 'node:crypto';

type Tensor = Int32Array | Float32Array | Uint8Array;
/** The tensors of a request's batch, in digest order, with the dtype each must have. */
const TENSORS = [
  ['inputIds', 'int32'],
  ['lossMask', 'float32'],
  ['oldLogprobs', 'float32'],
  ['advantages', 'float32'],
  ['pgWeight', 'float32'],
  ['akbeWeight', 'float32'],
  ['recomputeOld', 'uint8'],
  ['proxLogprobs', 'float32'],
  ['refLogp', 'float32'],
] as const;

/** The parts of a train request (the trainer's TrainCall) that decide the weights. */
export interface DigestibleTrainRequest {
  step: number;
  policyVersion: number;
  lr: number;
  epochs: number;
  rowsPerUpdate: number;
  padId: number;
  losses: ReadonlyArray<{ name: string; options: Record<string, number> }>;
  batch: {
    rows: number;
    T: number;
    lossTokens: number;
    rowInfo: readonly unknown[];
    miniBatches: readonly (readonly number[])[];
    dpoPairs?: readonly unknown[];
  } & { [K in (typeof TENSORS)[number][0]]?: Tensor };
}

/** JSON with sorted keys and no whitespace (see the top of the file). */
export function canonicalJson(x: unknown): string {
  if (x === null || typeof x !== 'object') {
    if (typeof x === 'number' && !Number.isFinite(x)) throw new RangeError(`canonicalJson: ${x} is not JSON`);
    return JSON.stringify(x);
  }
  if (Array.isArray(x)) return `[${x.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  if (ArrayBuffer.isView(x)) throw new TypeError('canonicalJson: typed arrays go in as tensors');
  const o = x as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

function dtypeOf(t: Tensor): string {
  if (t instanceof Int32Array) return 'int32';
  if (t instanceof Float32Array) return 'float32';
  return 'uint8';
}

/** Shape of a tensor: [rows, T] for ids, [rows, T-1] for per-token arrays, [rows] per row. */
function shapeOf(name: string, t: Tensor, rows: number, T: number): number[] {
  if (name === 'inputIds') return [rows, T];
  if (t.length === rows * (T - 1) && name !== 'advantages' && name !== 'refLogp') return [rows, T - 1];
  return [t.length];
}

/** The canonical sha256 of a train request, bound to its run (see the top of the file). */
export function trainRequestDigest(runId: string, req: DigestibleTrainRequest): string {
  const b = req.batch;
  const meta = {
    runId,
    step: req.step,
    policyVersion: req.policyVersion,
    lr: req.lr,
    epochs: req.epochs,
    rowsPerUpdate: req.rowsPerUpdate,
    padId: req.padId,
    losses: req.losses,
    rows: b.rows,
    T: b.T,
    lossTokens: b.lossTokens,
    rowInfo: b.rowInfo,
    miniBatches: b.miniBatches,
    dpoPairs: b.dpoPairs,
  };
  const h = createHash('sha256');
  h.update('akbe-train-request/1\n');
  h.update(`meta ${canonicalJson(meta)}\n`);
  for (const [name, dtype] of TENSORS) {
    const t = b[name];
    if (t === undefined) continue;
    if (dtypeOf(t) !== dtype) throw new TypeError(`trainRequestDigest: batch.${name} must be ${dtype}`);
    const shape = shapeOf(name, t, b.rows, b.T).join('x');
    h.update(`tensor ${name} ${dtype} ${shape} ${t.byteLength}\n`);
    h.update(littleEndianBytes(t));
  }
  return h.digest('hex');
}

/** The tensor's bytes in little-endian order (what the host has on every platform Node runs on, checked). */
function littleEndianBytes(t: Tensor): Uint8Array {
  const bytes = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
  if (t.BYTES_PER_ELEMENT === 1 || LITTLE_ENDIAN) return bytes;
  const out = new Uint8Array(bytes.length);
  const n = t.BYTES_PER_ELEMENT;
  for (let i = 0; i < bytes.length; i += n) for (let j = 0; j < n; j++) out[i + j] = bytes[i + n - 1 - j];
  return out;
}
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A checkpoint's manifest: each file's sha256, keyed by file name. */
export type Manifest = Record<string, string>;

/** The manifest of named file contents. */
export function manifestOf(files: ReadonlyMap<string, Uint8Array> | Record<string, Uint8Array>): Manifest {
  const entries = files instanceof Map ? [...files] : Object.entries(files);
  return Object.fromEntries(entries.map(([name, bytes]) => [name, sha256Hex(bytes)]));
}

/** sha256 over every file's name and sha256, sorted by name (see the top of the file). */
export function manifestDigest(files: Manifest): string {
  const names = Object.keys(files).sort();
  for (const n of names)
    if (/[\s]/.test(n) || !/^[0-9a-f]{64}$/.test(files[n]))
      throw new RangeError(`manifestDigest: bad entry ${JSON.stringify(n)}`);
  return sha256Hex(`akbe-manifest/1\n${names.map((n) => `${n} ${files[n]}\n`).join('')}`);
}
