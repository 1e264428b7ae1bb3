/**
 * The policy's inference graphs on ORT sessions: the KV-cache decode graph behind the decode
 * loop's `DecodeBackend`, and the forward graph that scores sequences (`logprobs`). Parameters are
 * graph inputs: one ORT tensor per parameter wraps the policy's own Float32Array (no copy), and
 * `setParams` swaps them when a new policy version arrives.
 */
import type * as Ort from 'onnxruntime-node';
import { type GPTConfig, gpt2ParamShapes, type Params } from './config.js';
import type { DecodeBackend, DecodeForward } from './decoder.js';
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

/** The KV-cache decode graph (src/gpu/model.ts) as a DecodeBackend. */
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
  ) {
    super(ort, cfg, created, params, bytes);
    this.vocabSize = cfg.vocab_size;
    this.nLayer = cfg.n_layer;
    this.nHead = cfg.n_head;
    this.headDim = cfg.n_embd / cfg.n_head;
    this.maxPositions = cfg.n_positions;
  }

  static async create(cfg: GPTConfig, params: Params, session: SessionConfig): Promise<OrtDecodeBackend> {
    const ort = await loadOrt();
    const bytes = buildDecodeGraph(cfg).serialize();
    return new OrtDecodeBackend(ort, cfg, await createSession(bytes, session), params, bytes);
  }

  /** Feeds for one forward (parameters included). */
  feeds(step: DecodeForward): Record<string, Ort.Tensor> {
    const { ort } = this;
    const { batch: B, newLen: S, pastLen: P } = step;
    const feeds: Record<string, Ort.Tensor> = {
      ...this.params,
      input_ids: new ort.Tensor('int64', step.inputIds, [B, S]),
      position_ids: new ort.Tensor('int64', step.positionIds, [B, S]),
      attention_mask: new ort.Tensor('bool', step.attentionMask, [B, P + S]),
    };
    const dims = [B, this.nHead, P, this.headDim];
    for (let i = 0; i < this.nLayer; i++) {
      feeds[`past_key_${i}`] = new ort.Tensor('float32', step.past[2 * i], dims);
      feeds[`past_value_${i}`] = new ort.Tensor('float32', step.past[2 * i + 1], dims);
    }
    return feeds;
  }

  async forward(step: DecodeForward): Promise<{ logits: Float32Array; present: Float32Array[] }> {
    const out = await this.created.session.run(this.feeds(step));
    const present: Float32Array[] = [];
    for (let i = 0; i < this.nLayer; i++) {
      present.push(
        out[`present_key_${i}`].data as Float32Array,
        out[`present_value_${i}`].data as Float32Array,
      );
    }
    return { logits: out.logits.data as Float32Array, present };
  }

  /** Node counts per provider for a two-token prefill (for `akbe policy info`). */
  placement(device: DeviceChoice): Promise<Record<string, number>> {
    const feeds = this.feeds({
      batch: 1,
      newLen: 2,
      pastLen: 0,
      inputIds: new BigInt64Array(2),
      positionIds: BigInt64Array.from([0n, 1n]),
      attentionMask: Uint8Array.from([1, 1]),
      past: Array.from({ length: 2 * this.nLayer }, () => new Float32Array(0)),
    });
    return nodePlacement(this.graphBytes, feeds, { device }).then((r) => r.nodesPerProvider);
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
