/**
 * The decode loop: prefill a batch of prompts, then sample one token per row per step with a KV
 * cache, until every row has stopped.
 *
 * A `RowBatch` (the backend's) holds rows of different lengths: each row's positions count its own
 * tokens from 0 and a per-row mask hides whatever is not its own, so a row computes what it would
 * alone. Rows join (prefill) and leave (keepRows) between steps: `decodeBatch` here decodes a
 * fixed set, continuous.ts lets requests join a batch already decoding. Each request carries its
 * own seed: its tokens do not depend on its batch-mates.
 */
import type { TurnSampling } from '../util/generate-turn.js';
import { Rng } from '../util/rng.js';
import { type SamplingOptions, sampleRow, validateSampling } from './sampler.js';
import { type Detokenize, type FinishReason, StopChecker } from './stop.js';

/**
 * One request to the decode loop: the shared sampling fields (util/generate-turn.ts; temperature
 * and topP optional here, default 1) and what only the compute core needs. Its result is not a
 * GeneratedTurn on purpose: `logprobs` here is the sampling distribution's (logits / T), and the
 * policy logprob the wire and the machine call `logprobs` is `policyLogprobs` below.
 */
export interface GenerateRequest
  extends Pick<TurnSampling, 'maxNewTokens' | 'seed'>,
    Partial<Pick<TurnSampling, 'temperature' | 'topP'>> {
  /** Prompt token ids (at least one). */
  prompt: number[];
  stopTokens?: number[];
  stopStrings?: string[];
  /**
   * The policy version that must decode it (a version the backend holds, `holdVersion`): the
   * continuous batcher admits it only into a batch of that version. Absent: the current parameters.
   */
  version?: number;
}

export interface GenerateResult {
  /** Generated token ids, including the stop token / the token completing a stop string. */
  tokens: number[];
  /** Per token: log softmax(logits / T), the sampling policy before top-p (T = 1 when greedy). */
  logprobs: number[];
  /** Per token: log softmax(logits) at temperature 1, the policy logprob PPO/GRPO ratios use. */
  policyLogprobs: number[];
  finishReason: FinishReason;
  /** The stop string that ended generation, when finishReason is 'stop_string'. */
  stopString?: string;
}

/**
 * A batch in flight whose rows join and leave between steps. Each row has its own length: its
 * tokens sit at positions 0 .. len - 1 and a mask hides whatever else its cache holds (padding,
 * stale slots). The batch runs the parameters the backend had when it was opened, to its end.
 */
export interface RowBatch {
  /** Rows now in the batch, in the order of the logits' rows. */
  readonly size: number;
  /** The backend's `paramsVersion` when this batch was opened. */
  readonly version: number;
  /**
   * Appends rows and runs their prompts in one forward (prefill). `slots[j]` is the most
   * positions row j will ever hold (prompt + new tokens). Returns the logits of each new row's
   * last prompt position [prompts.length, V].
   */
  prefill(prompts: readonly number[][], slots: readonly number[]): Promise<Float32Array>;
  /** Feeds one token per row, each at its row's next position; returns logits [size, V]. */
  step(tokens: readonly number[]): Promise<Float32Array>;
  /** Keeps rows `keep` (distinct, any order): new row i is old row keep[i]. Finished rows stop costing compute. */
  keepRows(keep: readonly number[]): void;
}

/** What the decode loop needs from a model; the graph sessions live behind it. */
export interface DecodeBackend {
  readonly vocabSize: number;
  readonly maxPositions: number;
  /** Changes whenever the parameters do: a batch opened before keeps the old ones. */
  readonly paramsVersion: number;
  /** Opens an empty batch on the current parameters, or on those of a held policy version. */
  open(version?: number): RowBatch;
  /**
   * Optional: steps several of its open batches in one pass (the policy versions in flight, each
   * batch on its own parameters); returns per batch what its own `step(tokens)` would, to the bit.
   */
  stepMany?(steps: ReadonlyArray<{ batch: RowBatch; tokens: readonly number[] }>): Promise<Float32Array[]>;
}

/** A request names a policy version the decoder does not hold (never loaded, or out of the window). */
export class PolicyVersionNotHeldError extends Error {
  constructor(
    readonly version: number,
    readonly held: readonly number[],
  ) {
    super(
      `policy version ${version} is not held by this decoder (it holds ${held.length ? held.map((v) => `v${v}`).join(', ') : 'none'})`,
    );
    this.name = 'PolicyVersionNotHeldError';
  }
}

/** A request the model cannot serve (prompt too long, bad options); names the request and the problem. */
export class GenerateRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GenerateRequestError';
  }
}

/** One request's decoding state: its Rng, options, stop rule and the logprobs so far. */
export class DecodeRow {
  readonly rng: Rng;
  readonly sampling: SamplingOptions;
  readonly stop: StopChecker;
  readonly logprobs: number[] = [];
  readonly policyLogprobs: number[] = [];
  /** The last sampled token, fed at the next step. */
  next = -1;

  /** Checks `req` (throws GenerateRequestError) and starts its row. */
  constructor(
    readonly req: GenerateRequest,
    backend: Pick<DecodeBackend, 'vocabSize' | 'maxPositions'>,
    detokenize?: Detokenize,
    index = 0,
  ) {
    const maxNew = checkRequest(req, backend, index);
    this.rng = new Rng(req.seed);
    this.sampling = { temperature: req.temperature ?? 1, topP: req.topP ?? 1 };
    this.stop = new StopChecker(
      { stopTokens: req.stopTokens, stopStrings: req.stopStrings },
      maxNew,
      detokenize,
    );
  }

  /** Most positions this row's cache will hold. */
  get slots(): number {
    return this.req.prompt.length + this.stop.maxNewTokens;
  }

  /** Samples this row's token from logits row `b` [.., V]; returns its result once it has finished. */
  advance(logits: Float32Array, b: number, vocab: number): GenerateResult | undefined {
    const s = sampleRow(logits, b * vocab, vocab, this.sampling, this.rng);
    this.logprobs.push(s.logprob);
    this.policyLogprobs.push(s.policyLogprob);
    this.next = s.token;
    const finish = this.stop.push(s.token);
    if (!finish) return undefined;
    return {
      tokens: this.stop.generated,
      logprobs: this.logprobs,
      policyLogprobs: this.policyLogprobs,
      finishReason: finish,
      ...(this.stop.matched !== undefined ? { stopString: this.stop.matched } : {}),
    };
  }
}

/** Checks a request against the model; returns the effective max new tokens (clamped to the context). */
export function checkRequest(
  req: GenerateRequest,
  backend: Pick<DecodeBackend, 'vocabSize' | 'maxPositions'>,
  index = 0,
): number {
  const where = `generate request ${index}`;
  if (!Array.isArray(req.prompt) || req.prompt.length === 0)
    throw new GenerateRequestError(`${where}: prompt must hold at least one token id`);
  for (const id of req.prompt) {
    if (!Number.isInteger(id) || id < 0 || id >= backend.vocabSize) {
      throw new GenerateRequestError(
        `${where}: token id ${id} is outside the vocabulary [0, ${backend.vocabSize})`,
      );
    }
  }
  if (req.prompt.length >= backend.maxPositions) {
    throw new GenerateRequestError(
      `${where}: prompt of ${req.prompt.length} tokens leaves no room in n_positions = ${backend.maxPositions}`,
    );
  }
  if (!Number.isInteger(req.maxNewTokens) || req.maxNewTokens < 1)
    throw new GenerateRequestError(`${where}: maxNewTokens must be an integer >= 1, got ${req.maxNewTokens}`);
  if (!Number.isInteger(req.seed))
    throw new GenerateRequestError(`${where}: seed must be an integer, got ${req.seed}`);
  try {
    validateSampling({ temperature: req.temperature ?? 1, topP: req.topP ?? 1 });
  } catch (e) {
    throw new GenerateRequestError(`${where}: ${(e as Error).message}`);
  }
  // Positions beyond the learned table do not exist: the row ends with 'length' there.
  return Math.min(req.maxNewTokens, backend.maxPositions - req.prompt.length);
}

/**
 * The rows to keep, as `RowBatch.keepRows` takes them: survivors stay where they are and the last
 * survivors move into the holes, so removing a row moves one row, not every row after it.
 */
export function survivors(alive: readonly boolean[]): number[] {
  const order: number[] = [];
  let last = alive.length - 1;
  for (let b = 0; b <= last; b++) {
    if (alive[b]) {
      order.push(b);
      continue;
    }
    while (last > b && !alive[last]) last--;
    if (last > b) order.push(last--);
  }
  return order;
}

/** Keeps rows `keep` of a [rows, ...] tensor whose row stride is `stride`. */
export function gatherRows<T extends Float32Array | Uint8Array>(
  data: T,
  stride: number,
  keep: readonly number[],
): T {
  const out = new (data.constructor as new (n: number) => T)(keep.length * stride);
  keep.forEach((r, i) => {
    out.set(data.subarray(r * stride, (r + 1) * stride), i * stride);
  });
  return out;
}

/** The steps of several batches one after the other (what `DecodeBackend.stepMany` does in one pass). */
export async function stepEach(
  steps: ReadonlyArray<{ batch: RowBatch; tokens: readonly number[] }>,
): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (const s of steps) out.push(await s.batch.step(s.tokens));
  return out;
}

/**
 * Decodes a fixed set of requests together: one prefill, then one step per token until every
 * row has stopped. Results come back in request order.
 */
export async function decodeBatch(
  backend: DecodeBackend,
  requests: GenerateRequest[],
  detokenize?: Detokenize,
): Promise<GenerateResult[]> {
  if (requests.length === 0) return [];
  const rows = requests.map((req, i) => new DecodeRow(req, backend, detokenize, i));
  const results: GenerateResult[] = new Array(requests.length);
  const V = backend.vocabSize;
  const batch = backend.open();
  let active = rows.map((_, i) => i);
  let logits = await batch.prefill(
    rows.map((r) => r.req.prompt),
    rows.map((r) => r.slots),
  );
  for (;;) {
    const alive = active.map((i, b) => {
      const done = rows[i].advance(logits, b, V);
      if (done) results[i] = done;
      return !done;
    });
    const keep = survivors(alive);
    if (keep.length === 0) return results;
    if (keep.length < active.length) {
      batch.keepRows(keep);
      active = keep.map((b) => active[b]);
    }
    logits = await batch.step(active.map((i) => rows[i].next));
  }
}
