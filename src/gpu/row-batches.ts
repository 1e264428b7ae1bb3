/**
 * The two `RowBatch`es of `OrtDecodeBackend` (ort-policy.ts, which implements `RowBatchHost`): rows whose caches live here and are
 * written in place by the step graph (`CachedRows`, the default), and rows in model.ts's
 * Concat-grown cache (`ConcatRows`, the cross-check). Both let rows of different lengths join
 * (prefill, left-padded prompts in one forward) and leave (keepRows) between steps.
 */
import type * as Ort from 'onnxruntime-node';
import { gatherRows, type RowBatch } from './decoder.js';
import type { CreatedSession } from './session.js';

/** The new tokens of one run of model.ts's decode graph: prompts at prefill, one token per row after. */
export interface ConcatStep {
  batch: number;
  /** New tokens per row. */
  newLen: number;
  /** Positions already cached per row (the past's length, padding included). */
  pastLen: number;
  /** [batch, newLen] */
  inputIds: BigInt64Array;
  /** [batch, newLen] */
  positionIds: BigInt64Array;
  /** [batch, pastLen + newLen]: 1 = attend, 0 = padding. */
  attentionMask: Uint8Array;
}

/**
 * What a row batch needs of the backend that made it: the model's shape, its graphs, and the
 * current parameters. Declared here (OrtDecodeBackend satisfies it) so this file does not import
 * the backend that imports it.
 */
export interface RowBatchHost {
  readonly vocabSize: number;
  readonly nLayer: number;
  readonly nHead: number;
  readonly headDim: number;
  readonly maxPositions: number;
  readonly batchInvariant: boolean;
  readonly paramsVersion: number;
  readonly ortApi: typeof Ort;
  paramTensors(): Record<string, Ort.Tensor>;
  prefillPadded(
    prompts: readonly number[][],
    params: Record<string, Ort.Tensor>,
  ): Promise<{ logits: Float32Array; present: Float32Array[]; width: number }>;
  runConcat(
    step: ConcatStep,
    past: Float32Array[],
    params: Record<string, Ort.Tensor>,
  ): Promise<{ logits: Float32Array; present: Float32Array[] }>;
}

/** A step graph's outputs by name (`logits`, `new_key_i`, `new_value_i`). */
export type StepOutputs = Record<string, Ort.Tensor>;

/** One batch's step, ready to run: the step graph's feeds, and what takes its outputs. */
export interface StepPlan {
  feeds: Record<string, Ort.Tensor>;
  /** Writes the new keys/values into the batch; returns its logits [size, V]. */
  finish(out: StepOutputs): Float32Array;
}

/** The parameters of a held policy version (OrtDecodeBackend.holdVersion) a batch runs on. */
export interface HeldParams {
  tensors: Record<string, Ort.Tensor>;
  /** What the batch reports as its `version` (negative for a version loaded for decoding only). */
  paramsVersion: number;
}

/** `rows` rows of `from` columns (of `width` values each) right-aligned in `to` columns: left padding. */
function padLeft<T extends Float32Array | Uint8Array>(
  data: T,
  rows: number,
  from: number,
  to: number,
  width = 1,
): T {
  const out = new (data.constructor as new (n: number) => T)(rows * to * width);
  for (let r = 0; r < rows; r++)
    out.set(data.subarray(r * from * width, (r + 1) * from * width), (r * to + to - from) * width);
  return out;
}

/**
 * Indices of `prompts` in groups of similar length, shortest first: a group grows while its left
 * padding stays under a quarter of its real tokens (sorted ascending, the newest member is the
 * longest, so the group's forward covers members x its length).
 */
export function lengthGroups(prompts: readonly (readonly number[])[]): number[][] {
  const order = prompts.map((_, j) => j).sort((a, b) => prompts[a].length - prompts[b].length);
  const groups: number[][] = [];
  let group: number[] = [];
  let real = 0;
  for (const j of order) {
    const len = prompts[j].length;
    if (group.length > 0 && (group.length + 1) * len > 1.25 * (real + len)) {
      groups.push(group);
      group = [];
      real = 0;
    }
    group.push(j);
    real += len;
  }
  groups.push(group);
  return groups;
}

/**
 * Rows in model.ts's Concat-grown cache [B, H, P, hd]: rows are left-padded to the common length P
 * (the mask hides the padding), every step appends one column for all rows.
 */
export class ConcatRows implements RowBatch {
  private past: Float32Array[];
  private mask = new Uint8Array(0);
  private lens: number[] = [];
  private width = 0;
  private readonly params: Record<string, Ort.Tensor>;
  readonly version: number;

  constructor(
    private readonly backend: RowBatchHost,
    held?: HeldParams,
  ) {
    this.params = held?.tensors ?? backend.paramTensors();
    this.version = held?.paramsVersion ?? backend.paramsVersion;
    this.past = Array.from({ length: 2 * backend.nLayer }, () => new Float32Array(0));
  }

  get size(): number {
    return this.lens.length;
  }

  async prefill(prompts: readonly number[][]): Promise<Float32Array> {
    const { nHead: H, headDim: hd } = this.backend;
    const { logits, present, width: L } = await this.backend.prefillPadded(prompts, this.params);
    const n = prompts.length;
    const B = this.size;
    const P = Math.max(this.width, L);
    const newMask = Uint8Array.from({ length: n * L }, (_, k) =>
      k % L >= L - prompts[Math.floor(k / L)].length ? 1 : 0,
    );
    this.past = this.past.map((old, i) => {
      const merged = new Float32Array((B + n) * H * P * hd);
      merged.set(padLeft(old, B * H, this.width, P, hd));
      merged.set(padLeft(present[i], n * H, L, P, hd), B * H * P * hd);
      return merged;
    });
    const mask = new Uint8Array((B + n) * P);
    mask.set(padLeft(this.mask, B, this.width, P));
    mask.set(padLeft(newMask, n, L, P), B * P);
    this.mask = mask;
    this.width = P;
    this.lens.push(...prompts.map((p) => p.length));
    return logits;
  }

  async step(tokens: readonly number[]): Promise<Float32Array> {
    const B = this.size;
    const P = this.width;
    const attentionMask = new Uint8Array(B * (P + 1));
    for (let b = 0; b < B; b++) {
      attentionMask.set(this.mask.subarray(b * P, (b + 1) * P), b * (P + 1));
      attentionMask[b * (P + 1) + P] = 1;
    }
    const step = {
      batch: B,
      newLen: 1,
      pastLen: P,
      inputIds: BigInt64Array.from(tokens, (id) => BigInt(id)),
      positionIds: BigInt64Array.from(this.lens, (len) => BigInt(len)),
      attentionMask,
    };
    const { logits, present } = await this.backend.runConcat(step, this.past, this.params);
    this.past = present;
    this.mask = attentionMask;
    this.width = P + 1;
    this.lens = this.lens.map((len) => len + 1);
    return logits;
  }

  keepRows(keep: readonly number[]): void {
    const stride = this.backend.nHead * this.width * this.backend.headDim;
    this.past = this.past.map((p) => gatherRows(p, stride, keep));
    this.mask = gatherRows(this.mask, this.width, keep);
    this.lens = keep.map((r) => this.lens[r]);
  }
}

/**
 * Rows in caches that live here, [rows, H, C, hd] per layer, written in place: row b's tokens in
 * slots 0 .. lens[b] - 1, the mask [rows, C] marking them. Buffers grow (rows by doubling, C to
 * the largest `slots` asked for) and are handed to ORT as views of their first `size` rows.
 *
 * A row's logprobs then differ at float rounding with what it is batched with: with the cache
 * length C (the attention's reductions run over all C slots), when a step has one row (ORT's CPU
 * MatMul takes another kernel at M = 1) and with the prompts it is prefilled beside (left padding).
 * With the backend's `batchInvariant` none of them varies: C is the context from the start, each
 * prompt is prefilled alone, and a one-row step runs two rows (a copy, discarded). Measured on the
 * committed base: bit-identical logprobs for a request alone, in batches of 2 to 17 rows at any
 * index, beside other prompt lengths and joining a running batch (test/gpu-batch-invariant.test.ts).
 */
export class CachedRows implements RowBatch {
  private cache: Float32Array[];
  private mask = new Uint8Array(0);
  private lens: number[] = [];
  private rowCapacity = 0;
  private capacity = 0;
  private readonly params: Record<string, Ort.Tensor>;
  readonly version: number;

  constructor(
    private readonly backend: RowBatchHost,
    private readonly session: CreatedSession,
    held?: HeldParams,
  ) {
    this.params = held?.tensors ?? backend.paramTensors();
    this.version = held?.paramsVersion ?? backend.paramsVersion;
    this.cache = Array.from({ length: 2 * backend.nLayer }, () => new Float32Array(0));
  }

  get size(): number {
    return this.lens.length;
  }

  /** Grows the buffers to hold `rows` rows of `capacity` slots, keeping what they hold. */
  private reserve(rows: number, capacity: number): void {
    if (this.backend.batchInvariant) {
      rows = Math.max(rows, 2); // a one-row step runs as two
      capacity = this.backend.maxPositions;
    }
    if (rows <= this.rowCapacity && capacity <= this.capacity) return;
    const { nHead: H, headDim: hd } = this.backend;
    // Rows double (up to 1024 at a time) and slots grow by half again (up to the context), so a
    // stream of joining rows reallocates a few times, not at every join.
    const R =
      rows <= this.rowCapacity ? this.rowCapacity : Math.max(rows, Math.min(2 * this.rowCapacity, 1024));
    const C =
      capacity <= this.capacity
        ? this.capacity
        : Math.max(capacity, Math.min(Math.ceil(1.5 * this.capacity), this.backend.maxPositions));
    const n = this.size * H; // (row, head) slabs in use
    this.cache = this.cache.map((old) => {
      const grown = new Float32Array(R * H * C * hd);
      for (let s = 0; s < n; s++)
        grown.set(old.subarray(s * this.capacity * hd, (s + 1) * this.capacity * hd), s * C * hd);
      return grown;
    });
    const mask = new Uint8Array(R * C);
    for (let b = 0; b < this.size; b++)
      mask.set(this.mask.subarray(b * this.capacity, (b + 1) * this.capacity), b * C);
    this.mask = mask;
    this.rowCapacity = R;
    this.capacity = C;
  }

  /**
   * Prefills in groups of similar length (lengthGroups): a left-padded forward costs its longest
   * prompt for every row, and rows that join a running batch mix short first turns with long later
   * ones. Rows keep the order of `prompts`.
   */
  async prefill(prompts: readonly number[][], slots: readonly number[]): Promise<Float32Array> {
    const { nHead: H, headDim: hd, vocabSize: V } = this.backend;
    const first = this.size;
    this.reserve(first + prompts.length, Math.max(...slots, ...prompts.map((p) => p.length + 1)));
    const C = this.capacity;
    const logits = new Float32Array(prompts.length * V);
    const groups = this.backend.batchInvariant ? prompts.map((_, j) => [j]) : lengthGroups(prompts);
    for (const group of groups) {
      const out = await this.backend.prefillPadded(
        group.map((j) => prompts[j]),
        this.params,
      );
      const L = out.width;
      group.forEach((j, g) => {
        const b = first + j;
        const len = prompts[j].length;
        const pad = L - len;
        for (let i = 0; i < 2 * this.backend.nLayer; i++) {
          for (let h = 0; h < H; h++) {
            const from = ((g * H + h) * L + pad) * hd;
            this.cache[i].set(out.present[i].subarray(from, from + len * hd), (b * H + h) * C * hd);
          }
        }
        this.mask.fill(1, b * C, b * C + len);
        logits.set(out.logits.subarray(g * V, (g + 1) * V), j * V);
      });
    }
    this.lens.push(...prompts.map((p) => p.length));
    return logits;
  }

  async step(tokens: readonly number[]): Promise<Float32Array> {
    const plan = this.plan(tokens);
    return plan.finish(await this.session.session.run(plan.feeds));
  }

  /**
   * One step as feeds of the step graph and what to do with its outputs, so that the steps of
   * several batches can run in one pass (OrtDecodeBackend.stepMany, the versions in flight).
   */
  plan(tokens: readonly number[]): StepPlan {
    const C = this.capacity;
    for (let b = 0; b < this.size; b++)
      if (this.lens[b] >= C) throw new Error(`decode cache overflow: row ${b} is full at capacity ${C}`);
    // Batch-invariant: one row runs as two, row 1 a copy of row 0 whose outputs are dropped.
    if (this.backend.batchInvariant && this.size === 1) {
      this.mask.copyWithin(C, 0, C);
      const feeds = this.feeds([tokens[0], tokens[0]], [this.lens[0], this.lens[0]]);
      return {
        feeds,
        finish: (out) => {
          this.mask.fill(0, C, 2 * C); // row 1's slots stay clean for a row that joins later
          return this.commit(out, 2);
        },
      };
    }
    return { feeds: this.feeds(tokens, this.lens), finish: (out) => this.commit(out, tokens.length) };
  }

  /** Feeds of one step over the first `tokens.length` rows (rows past `size` are run and dropped). */
  private feeds(tokens: readonly number[], positions: readonly number[]): Record<string, Ort.Tensor> {
    const { backend } = this;
    const { nHead: H, headDim: hd } = backend;
    const C = this.capacity;
    const B = tokens.length;
    const ort = backend.ortApi;
    const feeds: Record<string, Ort.Tensor> = {
      ...this.params,
      input_ids: new ort.Tensor(
        'int64',
        BigInt64Array.from(tokens, (id) => BigInt(id)),
        [B, 1],
      ),
      position_ids: new ort.Tensor(
        'int64',
        BigInt64Array.from(positions, (len) => BigInt(len)),
        [B, 1],
      ),
      cache_mask: new ort.Tensor('bool', this.mask.subarray(0, B * C), [B, C]),
    };
    const dims = [B, H, C, hd];
    for (let i = 0; i < 2 * backend.nLayer; i++) {
      feeds[`cache_${i % 2 ? 'value' : 'key'}_${i >> 1}`] = new ort.Tensor(
        'float32',
        this.cache[i].subarray(0, B * H * C * hd),
        dims,
      );
    }
    return feeds;
  }

  /** Writes a step's new keys/values into each row's next slot; returns the logits of the real rows. */
  private commit(out: StepOutputs, B: number): Float32Array {
    const { backend } = this;
    const { nHead: H, headDim: hd } = backend;
    const C = this.capacity;
    const rows = this.size; // B, or 1 for a one-row step run as two
    // New keys/values [B, H, 1, hd] go into each row's next slot.
    for (let i = 0; i < 2 * backend.nLayer; i++) {
      const fresh = out[`new_${i % 2 ? 'value' : 'key'}_${i >> 1}`].data as Float32Array;
      for (let b = 0; b < rows; b++) {
        for (let h = 0; h < H; h++) {
          const s = b * H + h;
          this.cache[i].set(fresh.subarray(s * hd, (s + 1) * hd), (s * C + this.lens[b]) * hd);
        }
      }
    }
    for (let b = 0; b < rows; b++) this.mask[b * C + this.lens[b]++] = 1;
    const logits = out.logits.data as Float32Array;
    return rows === B ? logits : logits.subarray(0, rows * backend.vocabSize);
  }

  keepRows(keep: readonly number[]): void {
    const { nHead: H, headDim: hd } = this.backend;
    const C = this.capacity;
    const rowLen = H * C * hd;
    // Only the rows that move are copied, through copies of their sources (keep may be any order).
    const moves = keep.flatMap((r, b) => (r === b ? [] : [{ from: r, to: b }]));
    const held = this.cache.map((c) => moves.map(({ from }) => c.slice(from * rowLen, (from + 1) * rowLen)));
    const heldMask = moves.map(({ from }) => this.mask.slice(from * C, (from + 1) * C));
    moves.forEach(({ to }, k) => {
      this.cache.forEach((c, i) => {
        c.set(held[i][k], to * rowLen);
      });
      this.mask.set(heldMask[k], to * C);
    });
    // Rows past the kept ones are stale: clear their mask so a row that joins later starts clean.
    this.mask.fill(0, keep.length * C, this.size * C);
    this.lens = keep.map((r) => this.lens[r]);
  }
}
