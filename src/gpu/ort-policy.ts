/**
 * The policy's inference graphs on ORT sessions: the KV-cache decode graph behind the decode
 * loop's `DecodeBackend`, and the forward graph that scores sequences (`logprobs`). Parameters are
 * graph inputs: one ORT tensor per parameter wraps the policy's own Float32Array (no copy), and
 * `setParams` swaps them when a new policy version arrives. With 16-bit `weights`
 * (model-inputs.ts) each parameter is fed as its float16 or bfloat16 rounding instead (a copy of
 * half the bytes, made once per version), widened to float32 inside the graphs.
 */
import type * as Ort from 'onnxruntime-node';
import { architecture, type PolicyConfig } from './architecture.js';
import type { Params } from './config.js';
import { type DecodeBackend, PolicyVersionNotHeldError, type RowBatch, stepEach } from './decoder.js';
import { encodeModel } from './graph/onnx-proto.js';
import type { WeightsDtype } from './model-inputs.js';
import { buildDecodeGraph, buildForwardGraph } from './policy-graphs.js';
import {
  CachedRows,
  ConcatRows,
  type ConcatStep,
  type HeldParams,
  type RowBatchHost,
} from './row-batches.js';
import { float32ToBf16, float32ToF16 } from './safetensors.js';
import {
  type CreatedSession,
  createSession,
  type Device,
  type DeviceChoice,
  loadOrt,
  nodePlacement,
  type SessionConfig,
} from './session.js';
import { SharedStep } from './shared-step.js';

/** Sequences or parameters the policy cannot take; the message names what is wrong. */
export class PolicyInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyInputError';
  }
}

/** Wraps parameters as ORT tensors (rounded to 16 bits for such `weights`), checking names and sizes. */
export function paramFeeds(
  ort: typeof Ort,
  cfg: PolicyConfig,
  params: Params,
  weights: WeightsDtype = 'float32',
): Record<string, Ort.Tensor> {
  const feeds: Record<string, Ort.Tensor> = {};
  for (const { name, shape } of architecture(cfg).paramShapes()) {
    const data = params.get(name);
    if (!data) throw new PolicyInputError(`parameter ${name} is missing`);
    const n = shape.reduce((a, b) => a * b, 1);
    if (data.length !== n)
      throw new PolicyInputError(
        `parameter ${name} has ${data.length} values, shape [${shape.join(', ')}] needs ${n}`,
      );
    feeds[name] =
      weights === 'float16'
        ? new ort.Tensor('float16', float32ToF16(data), shape)
        : weights === 'bfloat16'
          ? new ort.Tensor('uint16', float32ToBf16(data), shape)
          : new ort.Tensor('float32', data, shape);
  }
  return feeds;
}

abstract class ParamSession {
  protected params: Record<string, Ort.Tensor>;
  protected constructor(
    protected readonly ort: typeof Ort,
    readonly cfg: PolicyConfig,
    protected readonly created: CreatedSession,
    params: Params,
    readonly graphBytes: Uint8Array,
    /** How the graphs take the weights (model-inputs.ts). */
    readonly weights: WeightsDtype,
  ) {
    this.params = paramFeeds(ort, cfg, params, weights);
  }

  get device(): Device {
    return this.created.device;
  }

  get createMs(): number {
    return this.created.createMs;
  }

  /** Changes with every `setParams`: batches opened before keep the parameters they started with. */
  paramsVersion = 0;

  setParams(params: Params): void {
    this.params = paramFeeds(this.ort, this.cfg, params, this.weights);
    this.paramsVersion++;
  }

  release(): Promise<void> {
    return this.created.session.release();
  }
}

/**
 * Decoding on ORT. Prefill runs model.ts's KV-cache decode graph with an empty cache (causal over
 * the left-padded prompts); each later step runs the cache-in-place step graph (decode-graph.ts):
 * the cache lives here, [B, H, capacity, hd] per layer, each row's tokens in slots 0 .. len - 1,
 * the step returns only the new keys/values and `CachedRows` writes them into each row's next
 * slot. With `concatCache`, steps run model.ts's graph instead (the cache is grown by Concat and
 * returned each step, rows left-padded to a common length): slower, kept as a cross-check.
 */
export class OrtDecodeBackend extends ParamSession implements DecodeBackend, RowBatchHost {
  readonly vocabSize: number;
  readonly nLayer: number;
  /** Heads the cache holds (the key/value heads under grouped-query attention). */
  readonly nHead: number;
  readonly headDim: number;
  readonly maxPositions: number;

  private constructor(
    ort: typeof Ort,
    cfg: PolicyConfig,
    created: CreatedSession,
    params: Params,
    bytes: Uint8Array,
    weights: WeightsDtype,
    /** The cached step graph's session; undefined = steps use the prefill (concat) graph. */
    private readonly step?: CreatedSession,
    private readonly stepBytes?: Uint8Array,
    /** Batches decode each row to the same bits whatever it is batched with (CachedRows). */
    readonly batchInvariant = false,
    /** Runs several batches' steps in one pass (stepMany); undefined with the concat cache. */
    private readonly shared?: SharedStep,
  ) {
    super(ort, cfg, created, params, bytes, weights);
    const arch = architecture(cfg);
    this.vocabSize = arch.vocabSize;
    this.nLayer = arch.nLayer;
    this.nHead = arch.kvHeads;
    this.headDim = arch.headDim;
    this.maxPositions = arch.maxPositions;
  }

  static async create(
    cfg: PolicyConfig,
    params: Params,
    session: SessionConfig,
    opts: { concatCache?: boolean; weights?: WeightsDtype; batchInvariant?: boolean } = {},
  ): Promise<OrtDecodeBackend> {
    if (opts.concatCache && opts.batchInvariant)
      throw new Error(
        'batch-invariant decoding needs the cached step graph (concatCache grows rows to a common length)',
      );
    const ort = await loadOrt();
    const weights = opts.weights ?? 'float32';
    const bytes = buildDecodeGraph(cfg, { weights }).serialize();
    const prefill = await createSession(bytes, session);
    // The step session on the device prefill resolved (auto probes once).
    const stepModel = opts.concatCache
      ? undefined
      : architecture(cfg).cachedStepGraph(weights).toModelProto();
    const stepBytes = stepModel && encodeModel(stepModel);
    const stepSession = { ...session, device: prefill.device, log: undefined };
    const step = stepBytes ? await createSession(stepBytes, stepSession) : undefined;
    return new OrtDecodeBackend(
      ort,
      cfg,
      prefill,
      params,
      bytes,
      weights,
      step,
      stepBytes,
      opts.batchInvariant,
      stepModel && new SharedStep(stepModel, stepSession),
    );
  }

  override get createMs(): number {
    return this.created.createMs + (this.step?.createMs ?? 0);
  }

  override async release(): Promise<void> {
    await super.release();
    await this.step?.session.release();
    await this.shared?.release();
  }

  /**
   * Steps several open batches (each its own version's rows and parameters) in one pass
   * (shared-step.ts); each batch gets what its own `step` returns, to the bit.
   */
  async stepMany(
    steps: ReadonlyArray<{ batch: RowBatch; tokens: readonly number[] }>,
  ): Promise<Float32Array[]> {
    const cached = steps.map((s) => s.batch).filter((b): b is CachedRows => b instanceof CachedRows);
    if (cached.length < steps.length || !this.shared) return stepEach(steps); // the concat cache
    return this.shared.run(cached.map((b, k) => b.plan(steps[k].tokens)));
  }

  /** Feeds of model.ts's decode graph (parameters included). */
  concatFeeds(step: ConcatStep, past: Float32Array[], params = this.params): Record<string, Ort.Tensor> {
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

  /** Parameter tensors of the policy versions batches may open on (holdVersion), by version. */
  private readonly held = new Map<number, HeldParams>();

  /**
   * Keeps the parameters of policy `version` for batches that name it (GenerateRequest.version):
   * `params` when given (an older version loaded for decoding only), else the current ones. Then
   * keeps only the newest `keep` held versions; batches already open keep theirs to their end.
   */
  holdVersion(version: number, keep: number, params?: Params): void {
    const tensors = params ? paramFeeds(this.ort, this.cfg, params, this.weights) : this.params;
    this.held.set(version, { tensors, paramsVersion: params ? -1 - version : this.paramsVersion });
    const versions = [...this.held.keys()].sort((a, b) => b - a);
    for (const v of versions.slice(Math.max(1, keep))) this.held.delete(v);
  }

  /** The policy versions held, oldest first. */
  heldVersions(): number[] {
    return [...this.held.keys()].sort((a, b) => a - b);
  }

  open(version?: number): RowBatch {
    let held: HeldParams | undefined;
    if (version !== undefined) {
      held = this.held.get(version);
      if (!held) throw new PolicyVersionNotHeldError(version, this.heldVersions());
    }
    return this.step ? new CachedRows(this, this.step, held) : new ConcatRows(this, held);
  }

  /** Runs model.ts's graph on left-padded prompts (empty past): logits [n, V], caches [n, H, L, hd]. */
  async prefillPadded(
    prompts: readonly number[][],
    params: Record<string, Ort.Tensor>,
  ): Promise<{ logits: Float32Array; present: Float32Array[]; width: number }> {
    const n = prompts.length;
    const L = Math.max(...prompts.map((p) => p.length));
    const inputIds = new BigInt64Array(n * L);
    const positionIds = new BigInt64Array(n * L);
    const attentionMask = new Uint8Array(n * L);
    prompts.forEach((prompt, b) => {
      const pad = L - prompt.length;
      prompt.forEach((id, t) => {
        inputIds[b * L + pad + t] = BigInt(id);
        positionIds[b * L + pad + t] = BigInt(t);
        attentionMask[b * L + pad + t] = 1;
      });
    });
    const empty = Array.from({ length: 2 * this.nLayer }, () => new Float32Array(0));
    const step = { batch: n, newLen: L, pastLen: 0, inputIds, positionIds, attentionMask };
    return { ...(await this.runConcat(step, empty, params)), width: L };
  }

  /** Runs model.ts's decode graph: logits [B, V] and the grown caches (key, value per layer). */
  async runConcat(
    step: ConcatStep,
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

/** The forward graph that scores whole sequences: log p(x_t | x_<t). */
export class OrtScorer extends ParamSession {
  static async create(
    cfg: PolicyConfig,
    params: Params,
    session: SessionConfig,
    opts: { weights?: WeightsDtype } = {},
  ): Promise<OrtScorer> {
    const ort = await loadOrt();
    const weights = opts.weights ?? 'float32';
    const bytes = buildForwardGraph(cfg, { weights }).serialize();
    return new OrtScorer(ort, cfg, await createSession(bytes, session), params, bytes, weights);
  }

  private check(seqs: number[][]): void {
    const { vocabSize: V, maxPositions: P } = architecture(this.cfg);
    seqs.forEach((s, i) => {
      if (s.length === 0) throw new PolicyInputError(`sequence ${i} is empty`);
      if (s.length > P)
        throw new PolicyInputError(
          `sequence ${i} has ${s.length} tokens, more than the policy's context of ${P}`,
        );
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
