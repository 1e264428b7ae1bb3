/**
 * The policy's inference graphs on ORT sessions: the KV-cache decode graph behind the decode
 * loop's `DecodeBackend`, and the forward graph that scores sequences (`logprobs`). Parameters are
 * graph inputs: one ORT tensor per parameter wraps the policy's own Float32Array (no copy), and
 * `setParams` swaps them when a new policy version arrives.
 */
import type * as Ort from 'onnxruntime-node';
import { type GPTConfig, gpt2ParamShapes, type Params } from './config.js';
import { buildCachedStepGraph } from './decode-graph.js';
import { type DecodeBackend, type DecodeState, type DecodeStep, gatherRows } from './decoder.js';
import { buildDecodeGraph, buildForwardGraph } from './model.js';
import {
  type CreatedSession,
  createSession,
  type Device,
  type DeviceChoice,
  loadOrt,
  nodePlacement,
  type SessionConfig,
} from './session.js';

/** Sequences or parameters the policy cannot take; the message names what is wrong. */
export class PolicyInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyInputError';
  }
}

/** Wraps parameters as ORT tensors, checking names and sizes against the config. */
export function paramFeeds(ort: typeof Ort, cfg: GPTConfig, params: Params): Record<string, Ort.Tensor> {
  const feeds: Record<string, Ort.Tensor> = {};
  for (const { name, shape } of gpt2ParamShapes(cfg)) {
    const data = params.get(name);
    if (!data) throw new PolicyInputError(`parameter ${name} is missing`);
    const n = shape.reduce((a, b) => a * b, 1);
    if (data.length !== n)
      throw new PolicyInputError(
        `parameter ${name} has ${data.length} values, shape [${shape.join(', ')}] needs ${n}`,
      );
    feeds[name] = new ort.Tensor('float32', data, shape);
  }
  return feeds;
}

abstract class ParamSession {
  protected params: Record<string, Ort.Tensor>;
  protected constructor(
    protected readonly ort: typeof Ort,
    readonly cfg: GPTConfig,
    protected readonly created: CreatedSession,
    params: Params,
    readonly graphBytes: Uint8Array,
  ) {
    this.params = paramFeeds(ort, cfg, params);
  }

  get device(): Device {
    return this.created.device;
  }

  get createMs(): number {
    return this.created.createMs;
  }

  setParams(params: Params): void {
    this.params = paramFeeds(this.ort, this.cfg, params);
  }

  release(): Promise<void> {
    return this.created.session.release();
  }
}

/**
 * Decoding on ORT. Prefill runs model.ts's KV-cache decode graph with an empty cache (causal over
 * the prompt); each later step runs the cache-in-place step graph (decode-graph.ts): the cache
 * lives here, [B, H, capacity, hd] per layer, the step returns only the new keys/values and this
 * class writes them into the next slot. With `concatCache`, steps run model.ts's graph instead
 * (the cache is grown by Concat and returned each step): slower, kept as a cross-check.
 */
export class OrtDecodeBackend extends ParamSession implements DecodeBackend {
  readonly vocabSize: number;
  readonly nLayer: number;
  readonly nHead: number;
  readonly headDim: number;
  readonly maxPositions: number;

  private constructor(
    ort: typeof Ort,
    cfg: GPTConfig,
    created: CreatedSession,
    params: Params,
    bytes: Uint8Array,
    /** The cached step graph's session; undefined = steps use the prefill (concat) graph. */
    private readonly step?: CreatedSession,
    private readonly stepBytes?: Uint8Array,
  ) {
    super(ort, cfg, created, params, bytes);
    this.vocabSize = cfg.vocab_size;
    this.nLayer = cfg.n_layer;
    this.nHead = cfg.n_head;
    this.headDim = cfg.n_embd / cfg.n_head;
    this.maxPositions = cfg.n_positions;
  }

  static async create(
    cfg: GPTConfig,
    params: Params,
    session: SessionConfig,
    opts: { concatCache?: boolean } = {},
  ): Promise<OrtDecodeBackend> {
    const ort = await loadOrt();
    const bytes = buildDecodeGraph(cfg).serialize();
    const prefill = await createSession(bytes, session);
    // The step session on the device prefill resolved (auto probes once).
    const stepBytes = opts.concatCache ? undefined : buildCachedStepGraph(cfg).serialize();
    const step = stepBytes
      ? await createSession(stepBytes, { ...session, device: prefill.device, log: undefined })
      : undefined;
    return new OrtDecodeBackend(ort, cfg, prefill, params, bytes, step, stepBytes);
  }

  override get createMs(): number {
    return this.created.createMs + (this.step?.createMs ?? 0);
  }

  override async release(): Promise<void> {
    await super.release();
    await this.step?.session.release();
  }

  /** Feeds of model.ts's decode graph (parameters included). */
  concatFeeds(step: DecodeStep, past: Float32Array[], params = this.params): Record<string, Ort.Tensor> {
    const { ort } = this;
    const { batch: B, newLen: S, pastLen: P } = step;
    const feeds: Record<string, Ort.Tensor> = {
      ...params,
      input_ids: new ort.Tensor('int64', step.inputIds, [B, S]),
      position_ids: new ort.Tensor('int64', step.positionIds, [B, S]),
      attention_mask: new ort.Tensor('bool', step.attentionMask, [B, P + S]),
    };
    const dims = [B, this.nHead, P, this.headDim];
    for (let i = 0; i < 2 * this.nLayer; i++) {
      feeds[`past_${i % 2 ? 'value' : 'key'}_${i >> 1}`] = new ort.Tensor('float32', past[i], dims);
    }
    return feeds;
  }

  begin(batch: number, capacity: number): DecodeState {
    return this.step ? new CachedState(this, this.step, batch, capacity) : new ConcatState(this);
  }

  /** Runs model.ts's decode graph: logits [B, V] and the grown caches (key, value per layer). */
  async runConcat(
    step: DecodeStep,
    past: Float32Array[],
    params: Record<string, Ort.Tensor>,
  ): Promise<{ logits: Float32Array; present: Float32Array[] }> {
    const out = await this.created.session.run(this.concatFeeds(step, past, params));
    const present: Float32Array[] = [];
    for (let i = 0; i < this.nLayer; i++) {
      present.push(
        out[`present_key_${i}`].data as Float32Array,
        out[`present_value_${i}`].data as Float32Array,
      );
    }
    return { logits: out.logits.data as Float32Array, present };
  }

  get ortApi(): typeof Ort {
    return this.ort;
  }

  /** The current parameter tensors: a batch takes them at its start and keeps them to its end. */
  paramTensors(): Record<string, Ort.Tensor> {
    return this.params;
  }

  /** Node counts per provider of the prefill graph (two tokens) and the step graph (for `akbe policy info`). */
  async placement(device: DeviceChoice): Promise<Record<string, Record<string, number>>> {
    const prefillFeeds = this.concatFeeds(
      {
        batch: 1,
        newLen: 2,
        pastLen: 0,
        inputIds: new BigInt64Array(2),
        positionIds: BigInt64Array.from([0n, 1n]),
        attentionMask: Uint8Array.from([1, 1]),
      },
      Array.from({ length: 2 * this.nLayer }, () => new Float32Array(0)),
    );
    const out: Record<string, Record<string, number>> = {
      'decode-prefill': (await nodePlacement(this.graphBytes, prefillFeeds, { device })).nodesPerProvider,
    };
    if (this.stepBytes) {
      const { ort } = this;
      const dims = [1, this.nHead, 2, this.headDim];
      const feeds: Record<string, Ort.Tensor> = {
        ...this.params,
        input_ids: new ort.Tensor('int64', new BigInt64Array(1), [1, 1]),
        position_ids: new ort.Tensor('int64', BigInt64Array.from([2n]), [1, 1]),
        cache_mask: new ort.Tensor('bool', Uint8Array.from([1, 1]), [1, 2]),
      };
      for (let i = 0; i < 2 * this.nLayer; i++) {
        feeds[`cache_${i % 2 ? 'value' : 'key'}_${i >> 1}`] = new ort.Tensor(
          'float32',
          new Float32Array(2 * this.nHead * this.headDim),
          dims,
        );
      }
      out['decode-step'] = (await nodePlacement(this.stepBytes, feeds, { device })).nodesPerProvider;
    }
    return out;
  }
}

/** A batch whose cache is grown by the graph's Concat and returned every step. */
class ConcatState implements DecodeState {
  private past: Float32Array[];
  private pastLen = 0;
  /** The policy version this batch started with, kept to its end. */
  private readonly params: Record<string, Ort.Tensor>;

  constructor(private readonly backend: OrtDecodeBackend) {
    this.params = backend.paramTensors();
    this.past = Array.from({ length: 2 * backend.nLayer }, () => new Float32Array(0));
  }

  async forward(step: DecodeStep): Promise<Float32Array> {
    const { logits, present } = await this.backend.runConcat(step, this.past, this.params);
    this.past = present;
    this.pastLen = step.pastLen + step.newLen;
    return logits;
  }

  keepRows(keep: number[]): void {
    const stride = this.backend.nHead * this.pastLen * this.backend.headDim;
    this.past = this.past.map((p) => gatherRows(p, stride, keep));
  }
}

/** A batch whose cache lives here, [B, H, capacity, hd] per layer, written in place. */
class CachedState implements DecodeState {
  private cache: Float32Array[];
  private batch: number;
  private filled = 0;
  /** The policy version this batch started with, kept to its end. */
  private readonly params: Record<string, Ort.Tensor>;

  constructor(
    private readonly backend: OrtDecodeBackend,
    private readonly step: CreatedSession,
    batch: number,
    private readonly capacity: number,
  ) {
    this.batch = batch;
    this.params = backend.paramTensors();
    const size = batch * backend.nHead * capacity * backend.headDim;
    this.cache = Array.from({ length: 2 * backend.nLayer }, () => new Float32Array(size));
  }

  /** Copies [B, H, n, hd] keys or values into slots filled .. filled + n of cache i. */
  private write(i: number, data: Float32Array, n: number): void {
    const { nHead: H, headDim: hd } = this.backend;
    const C = this.capacity;
    for (let bh = 0; bh < this.batch * H; bh++) {
      this.cache[i].set(data.subarray(bh * n * hd, (bh + 1) * n * hd), (bh * C + this.filled) * hd);
    }
  }

  async forward(step: DecodeStep): Promise<Float32Array> {
    const { backend } = this;
    const B = step.batch;
    if (step.pastLen + step.newLen > this.capacity)
      throw new Error(`decode cache overflow: ${step.pastLen + step.newLen} > capacity ${this.capacity}`);
    if (step.newLen > 1 || step.pastLen === 0) {
      // Prefill: causal attention over the prompt with model.ts's graph, then keep its cache.
      const empty = Array.from({ length: 2 * backend.nLayer }, () => new Float32Array(0));
      const { logits, present } = await backend.runConcat(step, empty, this.params);
      present.forEach((p, i) => {
        this.write(i, p, step.newLen);
      });
      this.filled = step.newLen;
      return logits;
    }
    const ort = backend.ortApi;
    const C = this.capacity;
    const mask = new Uint8Array(B * C);
    for (let b = 0; b < B; b++)
      mask.set(
        step.attentionMask.subarray(b * (step.pastLen + 1), b * (step.pastLen + 1) + step.pastLen),
        b * C,
      );
    const feeds: Record<string, Ort.Tensor> = {
      ...this.params,
      input_ids: new ort.Tensor('int64', step.inputIds, [B, 1]),
      position_ids: new ort.Tensor('int64', step.positionIds, [B, 1]),
      cache_mask: new ort.Tensor('bool', mask, [B, C]),
    };
    const dims = [B, backend.nHead, C, backend.headDim];
    for (let i = 0; i < 2 * backend.nLayer; i++) {
      feeds[`cache_${i % 2 ? 'value' : 'key'}_${i >> 1}`] = new ort.Tensor('float32', this.cache[i], dims);
    }
    const out = await this.step.session.run(feeds);
    for (let i = 0; i < 2 * backend.nLayer; i++)
      this.write(i, out[`new_${i % 2 ? 'value' : 'key'}_${i >> 1}`].data as Float32Array, 1);
    this.filled += 1;
    return out.logits.data as Float32Array;
  }

  keepRows(keep: number[]): void {
    const stride = this.backend.nHead * this.capacity * this.backend.headDim;
    this.cache = this.cache.map((c) => gatherRows(c, stride, keep));
    this.batch = keep.length;
  }
}

/** The forward graph that scores whole sequences: log p(x_t | x_<t). */
export class OrtScorer extends ParamSession {
  static async create(cfg: GPTConfig, params: Params, session: SessionConfig): Promise<OrtScorer> {
    const ort = await loadOrt();
    const bytes = buildForwardGraph(cfg).serialize();
    return new OrtScorer(ort, cfg, await createSession(bytes, session), params, bytes);
  }

  private check(seqs: number[][]): void {
    const { vocab_size: V, n_positions: P } = this.cfg;
    seqs.forEach((s, i) => {
      if (s.length === 0) throw new PolicyInputError(`sequence ${i} is empty`);
      if (s.length > P)
        throw new PolicyInputError(`sequence ${i} has ${s.length} tokens, more than n_positions = ${P}`);
      const bad = s.find((id) => !Number.isInteger(id) || id < 0 || id >= V);
      if (bad !== undefined)
        throw new PolicyInputError(`sequence ${i}: token id ${bad} is outside the vocabulary [0, ${V})`);
    });
  }

  /**
   * For each sequence of length L, the L-1 values log p(x_t | x_<t), t = 1..L-1. Sequences are
   * scored in chunks of similar length, right-padded with token 0: a causal model's logprobs at
   * t never see the padding after t, so the padded tail is simply dropped.
   */
  async logprobs(seqs: number[][], chunk = 32): Promise<number[][]> {
    this.check(seqs);
    const out: number[][] = seqs.map(() => []);
    const order = seqs.map((_, i) => i).filter((i) => seqs[i].length > 1);
    order.sort((a, b) => seqs[a].length - seqs[b].length);
    for (let k = 0; k < order.length; k += chunk) {
      const idx = order.slice(k, k + chunk);
      const T = Math.max(...idx.map((i) => seqs[i].length));
      const ids = new BigInt64Array(idx.length * T);
      idx.forEach((i, b) => {
        seqs[i].forEach((id, t) => {
          ids[b * T + t] = BigInt(id);
        });
      });
      const res = await this.created.session.run({
        ...this.params,
        input_ids: new this.ort.Tensor('int64', ids, [idx.length, T]),
      });
      const lp = res.logprobs.data as Float32Array; // [b, T-1]
      idx.forEach((i, b) => {
        out[i] = Array.from(lp.subarray(b * (T - 1), b * (T - 1) + seqs[i].length - 1));
      });
    }
    return out;
  }

  placement(device: DeviceChoice): Promise<Record<string, number>> {
    const feeds = { ...this.params, input_ids: new this.ort.Tensor('int64', new BigInt64Array(2), [1, 2]) };
    return nodePlacement(this.graphBytes, feeds, { device }).then((r) => r.nodesPerProvider);
  }
}
