/**
 * The safetensors file format (https://github.com/huggingface/safetensors), read and written in
 * plain TypeScript:
 *
 *   [8 bytes: N, uint64 little-endian][N bytes: JSON header][tensor bytes]
 *
 * The header maps each tensor name to `{ dtype, shape, data_offsets: [begin, end] }` (offsets
 * relative to the first byte after the header) and may hold `__metadata__`, a string-to-string
 * map. Like the reference writer we pad the header with spaces to a multiple of 8 bytes, so every
 * tensor starts 8-byte aligned when tensors are laid out largest-element first, and we reject
 * files whose ranges overlap, leave holes or run past the end: a file that fails a check is an
 * error naming the file and the problem, never a silent misread.
 */
import { endianness } from 'node:os';

/**
 * Element types we read and write. Parameters compute in F32; published checkpoints are often
 * BF16 or F16, whose raw 16-bit words are kept in a Uint16Array (see `toFloat32`).
 */
export type SafetensorsDtype = 'F64' | 'F32' | 'BF16' | 'F16' | 'I64' | 'I32';

const DTYPE_BYTES: Record<SafetensorsDtype, number> = { F64: 8, F32: 4, BF16: 2, F16: 2, I64: 8, I32: 4 };

export type TensorData = Float64Array | Float32Array | Uint16Array | BigInt64Array | Int32Array;

export interface SafetensorsTensor {
  dtype: SafetensorsDtype;
  shape: number[];
  data: TensorData;
}

// ---- 16-bit floats ----

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** bfloat16 words -> float32: the word is the float32's high half. */
export function bf16ToFloat32(words: Uint16Array): Float32Array {
  const out = new Float32Array(words.length);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < words.length; i++) bits[i] = words[i] << 16;
  return out;
}

/** float32 -> bfloat16 words, rounding to nearest even (as torch's .to(torch.bfloat16)); NaN stays NaN. */
export function float32ToBf16(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    f32[0] = values[i];
    const b = u32[0];
    if (Number.isNaN(values[i])) out[i] = (b >>> 16) | 0x40;
    else out[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  return out;
}

/** IEEE half words -> float32 (subnormals, infinities and NaN included). */
export function f16ToFloat32(words: Uint16Array): Float32Array {
  const out = new Float32Array(words.length);
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    const sign = w & 0x8000 ? -1 : 1;
    const exp = (w >> 10) & 0x1f;
    const frac = w & 0x3ff;
    out[i] =
      exp === 0
        ? sign * frac * 2 ** -24
        : exp === 31
          ? frac
            ? Number.NaN
            : sign * Number.POSITIVE_INFINITY
          : sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  return out;
}

/** float32 -> IEEE half words, rounding to nearest even; overflow gives infinity. */
export function float32ToF16(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    const sign = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
    const a = Math.abs(v);
    if (Number.isNaN(v)) out[i] = 0x7e00;
    else if (a >= 65520)
      out[i] = sign | 0x7c00; // rounds past the largest half (65504)
    else if (a < 2 ** -14)
      out[i] = sign | roundEven(a * 2 ** 24); // subnormal (may round up to the smallest normal)
    else {
      let e = Math.floor(Math.log2(a));
      if (2 ** e > a) e -= 1; // log2 rounding near powers of two
      if (2 ** (e + 1) <= a) e += 1;
      const m = roundEven((a / 2 ** e - 1) * 1024); // may carry into the exponent: still the right bits
      out[i] = sign | (((e + 15) << 10) + m);
    }
  }
  return out;
}

function roundEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** A floating-point tensor's values as float32 (BF16 and F16 widened exactly, F64 rounded). */
export function toFloat32(t: SafetensorsTensor): Float32Array {
  switch (t.dtype) {
    case 'F32':
      return t.data as Float32Array;
    case 'BF16':
      return bf16ToFloat32(t.data as Uint16Array);
    case 'F16':
      return f16ToFloat32(t.data as Uint16Array);
    case 'F64':
      return Float32Array.from(t.data as Float64Array);
    default:
      throw new TypeError(`safetensors: ${t.dtype} is not a floating-point dtype`);
  }
}

export interface SafetensorsFile {
  tensors: Map<string, SafetensorsTensor>;
  metadata: Record<string, string>;
}

/** A safetensors file that cannot be read: `file` names it, the message says what is wrong. */
export class SafetensorsFormatError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: ${problem}`, options);
    this.name = 'SafetensorsFormatError';
  }
}

/** The largest header we accept (the reference implementation uses the same limit). */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

function assertLittleEndianHost(): void {
  // Typed arrays use the host's byte order; every platform onnxruntime-node ships for is LE.
  if (endianness() !== 'LE') throw new Error('safetensors: big-endian hosts are not supported');
}

function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function dtypeOf(data: TensorData): SafetensorsDtype {
  if (data instanceof Uint16Array)
    throw new TypeError('safetensors: 16-bit data needs an explicit dtype (BF16 or F16)');
  if (data instanceof Float32Array) return 'F32';
  if (data instanceof Float64Array) return 'F64';
  if (data instanceof BigInt64Array) return 'I64';
  return 'I32';
}

/**
 * Serializes tensors (name -> shape + data) and string metadata into safetensors bytes.
 * Tensors are laid out by element size (largest first) then name, as the reference writer does,
 * so that each one is aligned to its element size.
 */
export function encodeSafetensors(
  tensors: Iterable<[string, { shape: readonly number[]; data: TensorData; dtype?: SafetensorsDtype }]>,
  metadata: Record<string, string> = {},
): Uint8Array {
  assertLittleEndianHost();
  const entries = [...tensors].map(([name, t]) => {
    const dtype = t.dtype ?? dtypeOf(t.data);
    if (numel(t.shape) !== t.data.length) {
      throw new RangeError(
        `safetensors: tensor ${name} has shape [${t.shape.join(', ')}] but ${t.data.length} values`,
      );
    }
    return { name, dtype, shape: [...t.shape], data: t.data };
  });
  entries.sort(
    (a, b) => DTYPE_BYTES[b.dtype] - DTYPE_BYTES[a.dtype] || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );

  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const e of entries) {
    const end = offset + e.data.byteLength;
    header[e.name] = { dtype: e.dtype, shape: e.shape, data_offsets: [offset, end] };
    offset = end;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const headerLen = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLen + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLen), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLen); // pad with spaces: still valid JSON
  let at = 8 + headerLen;
  for (const e of entries) {
    out.set(new Uint8Array(e.data.buffer, e.data.byteOffset, e.data.byteLength), at);
    at += e.data.byteLength;
  }
  return out;
}

type Fail = (problem: string, cause?: unknown) => never;

/** Parses safetensors bytes. `file` is used only in error messages. */
export function decodeSafetensors(bytes: Uint8Array, file: string): SafetensorsFile {
  assertLittleEndianHost();
  const fail: Fail = (problem, cause) => {
    throw new SafetensorsFormatError(file, problem, cause === undefined ? undefined : { cause });
  };
  const { header, dataStart } = readHeader(bytes, fail);
  const dataLen = bytes.length - dataStart;
  const metadata: Record<string, string> = {};
  const tensors = new Map<string, SafetensorsTensor>();
  const ranges: Array<[number, number, string]> = [];
  for (const [name, raw] of Object.entries(header)) {
    if (name === '__metadata__') {
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
        fail('__metadata__ is not an object');
      for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
        if (typeof v !== 'string') fail(`__metadata__.${k} is not a string`);
        metadata[k] = v as string;
      }
      continue;
    }
    const { tensor, begin, end } = tensorEntry(name, raw, bytes.subarray(dataStart), fail);
    ranges.push([begin, end, name]);
    tensors.set(name, tensor);
  }
  checkTiling(ranges, dataLen, fail);
  return { tensors, metadata };
}

/** The 8-byte length and the JSON header it announces (bounded by the file and MAX_HEADER_BYTES). */
function readHeader(bytes: Uint8Array, fail: Fail): { header: Record<string, unknown>; dataStart: number } {
  if (bytes.length < 8)
    fail(
      `too short for a safetensors file (${bytes.length} bytes; the format starts with an 8-byte header length)`,
    );
  const headerLen = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (headerLen > BigInt(Math.min(MAX_HEADER_BYTES, bytes.length - 8))) {
    fail(
      `header length ${headerLen} does not fit in the file (${bytes.length} bytes): not a safetensors file or truncated`,
    );
  }
  const dataStart = 8 + Number(headerLen);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, dataStart)));
  } catch (e) {
    fail(`header is not valid JSON (${(e as Error).message})`, e);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header))
    fail('header is not a JSON object');
  return { header: header as Record<string, unknown>, dataStart };
}

/** One tensor's header entry checked against the data section `data`, and its bytes copied out. */
function tensorEntry(
  name: string,
  raw: unknown,
  data: Uint8Array,
  fail: Fail,
): { tensor: SafetensorsTensor; begin: number; end: number } {
  const info = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  if (typeof info !== 'object' || info === null) fail(`entry for tensor ${name} is not an object`);
  const dtype = info.dtype;
  if (typeof dtype !== 'string' || !(dtype in DTYPE_BYTES)) {
    fail(
      `tensor ${name} has dtype ${JSON.stringify(dtype)}; supported: ${Object.keys(DTYPE_BYTES).join(', ')}`,
    );
  }
  const shape = info.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0))
    fail(`tensor ${name} has an invalid shape ${JSON.stringify(shape)}`);
  const offs = info.data_offsets;
  if (
    !Array.isArray(offs) ||
    offs.length !== 2 ||
    !offs.every((o) => Number.isSafeInteger(o) && o >= 0) ||
    offs[0] > offs[1]
  ) {
    fail(`tensor ${name} has invalid data_offsets ${JSON.stringify(offs)}`);
  }
  const [begin, end] = offs as [number, number];
  const elemBytes = DTYPE_BYTES[dtype as SafetensorsDtype];
  const n = numel(shape as number[]);
  if (end - begin !== n * elemBytes)
    fail(
      `tensor ${name}: data_offsets span ${end - begin} bytes but shape [${(shape as number[]).join(', ')}] x ${dtype} needs ${n * elemBytes}`,
    );
  if (end > data.length)
    fail(`tensor ${name} ends at byte ${end} of a ${data.length}-byte data section: file truncated`);
  // Copy into a fresh, aligned buffer: the file's bytes need not be aligned. (Not slice():
  // on a Node Buffer it returns a view of the shared pool.)
  const buf = new ArrayBuffer(end - begin);
  new Uint8Array(buf).set(data.subarray(begin, end));
  const typed: TensorData =
    dtype === 'F32'
      ? new Float32Array(buf)
      : dtype === 'BF16' || dtype === 'F16'
        ? new Uint16Array(buf)
        : dtype === 'F64'
          ? new Float64Array(buf)
          : dtype === 'I64'
            ? new BigInt64Array(buf)
            : new Int32Array(buf);
  return { tensor: { dtype: dtype as SafetensorsDtype, shape: shape as number[], data: typed }, begin, end };
}

/** The reference reader requires the tensors' byte ranges to tile the data section exactly. */
function checkTiling(ranges: Array<[number, number, string]>, dataLen: number, fail: Fail): void {
  ranges.sort((a, b) => a[0] - b[0]);
  let expected = 0;
  for (const [begin, end, name] of ranges) {
    if (begin !== expected)
      fail(`tensor ${name} starts at byte ${begin}, expected ${expected} (ranges overlap or leave a hole)`);
    expected = end;
  }
  if (expected !== dataLen)
    fail(`${dataLen - expected} bytes after the last tensor: file is not a well-formed safetensors file`);
}
