/**
 * Hand-written protobuf encoding of the ONNX messages the builder emits (ModelProto, GraphProto,
 * NodeProto, AttributeProto, TensorProto, ValueInfoProto). Field numbers are those of onnx.proto3
 * (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto). Only encoding is needed: ORT parses.
 */

/** ONNX TensorProto.DataType values for the dtypes the builder supports. */
export const ONNX_DTYPE = {
  float32: 1,
  uint16: 4,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
} as const;
export type DType = keyof typeof ONNX_DTYPE;

/** Growable protobuf writer: varints, length-delimited fields and nested messages. */
class PbWriter {
  private buf = new Uint8Array(256);
  private len = 0;

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  /** Unsigned or negative integer as a varint; negatives take 10 bytes (two's complement int64). */
  varint(v: number | bigint): void {
    let x = BigInt.asUintN(64, BigInt(v));
    this.ensure(10);
    while (x >= 0x80n) {
      this.buf[this.len++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    this.buf[this.len++] = Number(x);
  }

  tag(field: number, wire: 0 | 1 | 2 | 5): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, v: number | bigint): void {
    this.tag(field, 0);
    this.varint(v);
  }

  float32(field: number, v: number): void {
    this.tag(field, 5);
    this.ensure(4);
    new DataView(this.buf.buffer, this.len, 4).setFloat32(0, v, true);
    this.len += 4;
  }

  bytes(field: number, data: Uint8Array): void {
    this.tag(field, 2);
    this.varint(data.length);
    this.ensure(data.length);
    this.buf.set(data, this.len);
    this.len += data.length;
  }

  string(field: number, s: string): void {
    this.bytes(field, new TextEncoder().encode(s));
  }

  message(field: number, write: (w: PbWriter) => void): void {
    const inner = new PbWriter();
    write(inner);
    this.bytes(field, inner.finish());
  }

  packedInts(field: number, values: readonly number[]): void {
    const inner = new PbWriter();
    for (const v of values) inner.varint(v);
    this.bytes(field, inner.finish());
  }

  packedFloats(field: number, values: readonly number[]): void {
    const data = new Float32Array(values);
    this.bytes(field, new Uint8Array(data.buffer));
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

/** Attribute values, tagged with their ONNX type (an int 1 and a float 1 are different attributes). */
export type AttrValue =
  | { kind: 'int'; v: number }
  | { kind: 'float'; v: number }
  | { kind: 'ints'; v: number[] }
  | { kind: 'floats'; v: number[] }
  | { kind: 'string'; v: string }
  | { kind: 'tensor'; v: TensorData };

export interface TensorData {
  name: string;
  dtype: DType;
  dims: number[];
  /** Little-endian element bytes (ONNX raw_data). */
  raw: Uint8Array;
}

export type DimProto = number | string;

export interface ValueInfo {
  name: string;
  dtype: DType;
  shape: DimProto[];
}

export interface NodeData {
  opType: string;
  domain: string;
  name: string;
  inputs: string[];
  outputs: string[];
  attrs: Record<string, AttrValue>;
}

export interface ModelData {
  graphName: string;
  nodes: NodeData[];
  initializers: TensorData[];
  inputs: ValueInfo[];
  outputs: ValueInfo[];
  opsets: Array<{ domain: string; version: number }>;
  irVersion: number;
  producer: string;
}

const ATTR_TYPE = { float: 1, int: 2, string: 3, tensor: 4, floats: 6, ints: 7 } as const;

function writeTensor(w: PbWriter, t: TensorData): void {
  w.packedInts(1, t.dims); // dims
  w.int(2, ONNX_DTYPE[t.dtype]); // data_type
  w.string(8, t.name); // name
  w.bytes(9, t.raw); // raw_data
}

function writeAttr(w: PbWriter, name: string, a: AttrValue): void {
  w.string(1, name);
  w.int(20, ATTR_TYPE[a.kind]);
  switch (a.kind) {
    case 'float':
      w.float32(2, a.v);
      break;
    case 'int':
      w.int(3, a.v);
      break;
    case 'string':
      w.string(4, a.v);
      break;
    case 'tensor':
      w.message(5, (m) => writeTensor(m, a.v));
      break;
    case 'floats':
      w.packedFloats(7, a.v);
      break;
    case 'ints':
      w.packedInts(8, a.v);
      break;
    default: {
      const _: never = a;
      throw new Error(`unknown attribute kind ${JSON.stringify(_)}`);
    }
  }
}

function writeValueInfo(w: PbWriter, v: ValueInfo): void {
  w.string(1, v.name);
  w.message(2, (type) =>
    type.message(1, (tensorType) => {
      tensorType.int(1, ONNX_DTYPE[v.dtype]);
      tensorType.message(2, (shape) => {
        for (const d of v.shape) {
          shape.message(1, (dim) => (typeof d === 'number' ? dim.int(1, d) : dim.string(2, d)));
        }
      });
    }),
  );
}

function writeNode(w: PbWriter, n: NodeData): void {
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  w.string(3, n.name);
  w.string(4, n.opType);
  for (const [k, a] of Object.entries(n.attrs)) w.message(5, (m) => writeAttr(m, k, a));
  if (n.domain) w.string(7, n.domain);
}

/** Serialises a model to ONNX ModelProto bytes, ready for `InferenceSession.create(bytes)`. */
export function encodeModel(m: ModelData): Uint8Array {
  const w = new PbWriter();
  w.int(1, m.irVersion); // ir_version
  w.string(2, m.producer); // producer_name
  w.message(7, (g) => {
    for (const n of m.nodes) g.message(1, (x) => writeNode(x, n));
    g.string(2, m.graphName);
    for (const t of m.initializers) g.message(5, (x) => writeTensor(x, t));
    for (const v of m.inputs) g.message(11, (x) => writeValueInfo(x, v));
    for (const v of m.outputs) g.message(12, (x) => writeValueInfo(x, v));
  });
  for (const o of m.opsets) {
    w.message(8, (x) => {
      if (o.domain) x.string(1, o.domain);
      x.int(2, o.version);
    });
  }
  return w.finish();
}
