/**
 * The graph container: typed, shaped tensors and the node list (which is also the autodiff tape).
 *
 * A `Tensor` is a symbolic value inside one `Graph`: a name, a dtype and a shape whose dims are
 * numbers (static) or strings (symbolic, e.g. 'B' or 'past'; ONNX dim_param). Op helpers in
 * `./ops/*.ts` append nodes with `graph.addNode` and compute output shapes, so every tensor's
 * shape is known while building. Names are assigned on creation and may be changed with
 * `graph.output(t, name)` before serialisation.
 */
import {
  type AttrValue,
  type DimProto,
  type DType,
  encodeModel,
  type ModelData,
  type TensorData,
} from './onnx-proto.js';

export type { AttrValue, DType } from './onnx-proto.js';
export type Dim = DimProto;
export type Shape = Dim[];

/** A shape or dtype mismatch found while building: a bug in the graph code, not in the data. */
export class GraphBuildError extends Error {
  constructor(
    readonly op: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`${op}: ${message}`, opts);
    this.name = 'GraphBuildError';
  }
}

export class Tensor {
  /** The node that produced this tensor; undefined for graph inputs and constants. */
  producer?: GraphNode;
  constructor(
    readonly graph: Graph,
    public name: string,
    readonly dtype: DType,
    readonly shape: Shape,
  ) {}

  get rank(): number {
    return this.shape.length;
  }

  /** Static element count; throws on symbolic dims. */
  get size(): number {
    return this.shape.reduce<number>((n, d) => {
      if (typeof d !== 'number')
        throw new GraphBuildError('size', `tensor ${this.name} has symbolic dim '${d}'`);
      return n * d;
    }, 1);
  }

  toString(): string {
    return `${this.name}:${this.dtype}[${this.shape.join(',')}]`;
  }
}

export interface GraphNode {
  opType: string;
  domain: string;
  name: string;
  /** null marks an omitted optional input. */
  inputs: Array<Tensor | null>;
  outputs: Tensor[];
  attrs: Record<string, AttrValue>;
  /**
   * When set, the node is serialised as these primitive nodes instead (an op ORT lacks for this
   * dtype, e.g. float64 LayerNormalization); autodiff still sees one node and uses its rule.
   */
  expansion?: GraphNode[];
}

/** Attribute constructors: `{ axis: A.i(1), epsilon: A.f(1e-5) }`. */
export const A = {
  i: (v: number): AttrValue => ({ kind: 'int', v }),
  f: (v: number): AttrValue => ({ kind: 'float', v }),
  ints: (v: number[]): AttrValue => ({ kind: 'ints', v }),
  floats: (v: number[]): AttrValue => ({ kind: 'floats', v }),
  s: (v: string): AttrValue => ({ kind: 'string', v }),
};

export const FLOAT_DTYPES: ReadonlySet<DType> = new Set(['float32', 'float64']);

export interface GraphOptions {
  name?: string;
  /** Default ONNX opset (20: LayerNormalization-17, Gelu-20 with approximate='tanh'). */
  opset?: number;
}

export class Graph {
  readonly name: string;
  readonly opset: number;
  readonly inputs: Tensor[] = [];
  readonly outputs: Tensor[] = [];
  /** Nodes in creation order: a topological order, and the autodiff tape. */
  readonly nodes: GraphNode[] = [];
  private readonly initializers = new Map<Tensor, TensorData>();
  private readonly values = new Map<Tensor, number[]>();
  private readonly names = new Set<string>();
  private readonly scalars = new Map<string, Tensor>();
  private counter = 0;

  constructor(opts: GraphOptions = {}) {
    this.name = opts.name ?? 'akbe';
    this.opset = opts.opset ?? 20;
  }

  /** A fresh unique tensor name with a readable prefix. */
  freshName(prefix: string): string {
    let name: string;
    do name = `${prefix}_${this.counter++}`;
    while (this.names.has(name));
    this.names.add(name);
    return name;
  }

  private claim(name: string): void {
    if (this.names.has(name)) throw new GraphBuildError('graph', `duplicate tensor name '${name}'`);
    this.names.add(name);
  }

  /** Declares a graph input. Symbolic dims are strings. */
  input(name: string, dtype: DType, shape: Shape): Tensor {
    this.claim(name);
    const t = new Tensor(this, name, dtype, [...shape]);
    this.inputs.push(t);
    return t;
  }

  /** Marks `t` as a graph output, renamed to `name` (an Identity is inserted when `t` is an input or already named). */
  output(t: Tensor, name?: string): Tensor {
    if (t.graph !== this) throw new GraphBuildError('output', `tensor ${t} belongs to another graph`);
    let out = t;
    if (name !== undefined && name !== t.name) {
      if (!t.producer || this.outputs.includes(t) || this.initializers.has(t)) {
        out = this.addNode('Identity', [t], {}, [{ dtype: t.dtype, shape: t.shape }], name)[0];
      } else {
        this.claim(name);
        this.names.delete(t.name);
        t.name = name;
      }
    }
    this.outputs.push(out);
    return out;
  }

  /** A constant tensor (an ONNX initializer) holding `values` in `dtype`. */
  constant(values: ArrayLike<number> | number, dtype: DType, shape?: number[], name?: string): Tensor {
    const arr = typeof values === 'number' ? [values] : Array.from(values);
    const dims = shape ?? (typeof values === 'number' ? [] : [arr.length]);
    if (dims.reduce((a, b) => a * b, 1) !== arr.length) {
      throw new GraphBuildError('constant', `${arr.length} values do not fill shape [${dims}]`);
    }
    const tname = name ?? this.freshName('const');
    if (name) this.claim(name);
    const t = new Tensor(this, tname, dtype, dims);
    this.initializers.set(t, { name: tname, dtype, dims, raw: toRaw(arr, dtype) });
    this.values.set(t, arr);
    return t;
  }

  /** A cached rank-0 constant of `dtype` (broadcasts against anything). */
  scalar(v: number, dtype: DType): Tensor {
    const key = `${dtype}:${Object.is(v, -0) ? '-0' : v}`;
    let t = this.scalars.get(key);
    if (!t) {
      t = this.constant(v, dtype, []);
      this.scalars.set(key, t);
    }
    return t;
  }

  /** An int64 1-D constant, for shape/axes/starts inputs. */
  ints(values: number[]): Tensor {
    return this.constant(values, 'int64', [values.length]);
  }

  isConstant(t: Tensor): boolean {
    return this.initializers.has(t);
  }

  /** The values of a constant (axes, shapes, scalars), for gradient rules; throws otherwise. */
  constantValues(t: Tensor): number[] {
    const v = this.values.get(t);
    if (!v) throw new GraphBuildError('constantValues', `${t} is not a constant`);
    return v;
  }

  /** Appends one node; returns its output tensors with the given dtypes and shapes. */
  addNode(
    opType: string,
    inputs: Array<Tensor | null>,
    attrs: Record<string, AttrValue>,
    outs: Array<{ dtype: DType; shape: Shape }>,
    outName?: string,
    domain = '',
  ): Tensor[] {
    for (const t of inputs) {
      if (t && t.graph !== this) throw new GraphBuildError(opType, `input ${t} belongs to another graph`);
    }
    const name = this.freshName(opType);
    const outputs = outs.map((o, k) => {
      const tname = k === 0 && outName ? outName : this.freshName(opType.toLowerCase());
      if (k === 0 && outName) this.claim(outName);
      return new Tensor(this, tname, o.dtype, [...o.shape]);
    });
    const node: GraphNode = { opType, domain, name, inputs, outputs, attrs };
    for (const o of outputs) o.producer = node;
    this.nodes.push(node);
    return outputs;
  }

  /**
   * Records `opType` as one tape node whose serialised form is the nodes `build` appends (see
   * GraphNode.expansion). `build` returns the outputs, which become the node's outputs.
   */
  composite(
    opType: string,
    inputs: Tensor[],
    attrs: Record<string, AttrValue>,
    build: () => Tensor[],
  ): Tensor[] {
    const start = this.nodes.length;
    const outputs = build();
    const expansion = this.nodes.splice(start);
    const node: GraphNode = {
      opType,
      domain: '',
      name: this.freshName(opType),
      inputs,
      outputs,
      attrs,
      expansion,
    };
    for (const o of outputs) o.producer = node;
    this.nodes.push(node);
    return outputs;
  }

  /**
   * The model as plain data (what `serialize` encodes). Nodes and constants that no output depends on are dropped (autodiff
   * emits rules for every path; only the ones reaching an output are kept). All inputs are kept
   * so that callers can feed the same named inputs to every graph variant.
   */
  toModelProto(): ModelData {
    if (this.outputs.length === 0) throw new GraphBuildError('serialize', 'graph has no outputs');
    const live = new Set<GraphNode>();
    const liveTensors = new Set<Tensor>(this.outputs);
    for (let i = this.nodes.length - 1; i >= 0; i--) {
      const n = this.nodes[i];
      if (!n.outputs.some((o) => liveTensors.has(o))) continue;
      live.add(n);
      for (const m of flatten([n])) for (const t of m.inputs) if (t) liveTensors.add(t);
    }
    const emitted = flatten(this.nodes.filter((n) => live.has(n)));
    const domains = new Set(emitted.map((n) => n.domain));
    domains.delete('');
    return {
      graphName: this.name,
      irVersion: this.opset >= 21 ? 10 : 9,
      producer: 'akbe',
      opsets: [{ domain: '', version: this.opset }, ...[...domains].map((d) => ({ domain: d, version: 1 }))],
      nodes: emitted.map((n) => ({
        opType: n.opType,
        domain: n.domain,
        name: n.name,
        inputs: n.inputs.map((t) => t?.name ?? ''),
        outputs: n.outputs.map((t) => t.name),
        attrs: n.attrs,
      })),
      initializers: [...this.initializers]
        .filter(([t]) => liveTensors.has(t))
        .map(([t, d]) => ({ ...d, name: t.name })),
      inputs: this.inputs.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
      outputs: this.outputs.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
    };
  }

  /** ModelProto bytes, ready for `InferenceSession.create(bytes)`. */
  serialize(): Uint8Array {
    return encodeModel(this.toModelProto());
  }

  /** Number of nodes (before pruning), for tests and logs. */
  get nodeCount(): number {
    return this.nodes.length;
  }
}

function flatten(nodes: GraphNode[]): GraphNode[] {
  return nodes.flatMap((n) => (n.expansion ? flatten(n.expansion) : [n]));
}

function toRaw(values: number[], dtype: DType): Uint8Array {
  switch (dtype) {
    case 'float32':
      return new Uint8Array(new Float32Array(values).buffer);
    case 'float64':
      return new Uint8Array(new Float64Array(values).buffer);
    case 'int32':
      return new Uint8Array(new Int32Array(values).buffer);
    case 'int64':
      return new Uint8Array(BigInt64Array.from(values, (v) => BigInt(v)).buffer);
    case 'bool':
      return Uint8Array.from(values, (v) => (v ? 1 : 0));
    case 'uint16':
      return new Uint8Array(Uint16Array.from(values).buffer);
    case 'uint32':
      return new Uint8Array(Uint32Array.from(values).buffer);
    case 'float16': // half-precision values come in as inputs (weights), never as constants
      throw new GraphBuildError('constant', 'float16 constants are not supported');
    default: {
      const _: never = dtype;
      throw new GraphBuildError('constant', `unsupported dtype ${_}`);
    }
  }
}

// ---- shape helpers shared by the op files ----

export function sameDim(a: Dim, b: Dim): boolean {
  return a === b;
}

/** Numpy broadcasting of two shapes (symbolic dims broadcast against 1 and match themselves). */
export function broadcastShapes(op: string, a: Shape, b: Shape): Shape {
  const n = Math.max(a.length, b.length);
  const out: Shape = [];
  for (let i = 0; i < n; i++) {
    const da = i < n - a.length ? 1 : a[i - (n - a.length)];
    const db = i < n - b.length ? 1 : b[i - (n - b.length)];
    if (da === db || db === 1) out.push(da);
    else if (da === 1) out.push(db);
    else if (typeof da === 'string' || typeof db === 'string') out.push(typeof da === 'number' ? da : db);
    else throw new GraphBuildError(op, `cannot broadcast [${a}] with [${b}]`);
  }
  return out;
}

/** Normalises a possibly negative axis against `rank`. */
export function normAxis(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) throw new GraphBuildError(op, `axis ${axis} out of range for rank ${rank}`);
  return a;
}

export function shapeEquals(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
