/**
 * The decode loop: prefill a batch of prompts, then sample one token per row per step with a KV
 * cache, until every row has stopped.
 *
 * Rows have different prompt lengths, so prompts are LEFT-padded to the longest one: every row's
 * last prompt token then sits in the last column and each step appends one column for all rows.
 * The attention mask [B, P] hides the padding, and positions are per row (row b's first real token
 * has position 0), so a row computes exactly what it would alone. Finished rows are dropped from
 * the batch (their cache rows are compacted away) so a long-tailed batch does not keep paying for
 * them. Each request carries its own seed: its tokens do not depend on its batch-mates.
 */
import { Rng } from '../util/rng.js';
import { type Sample, type SamplingOptions, sampleRow, validateSampling } from './sampler.js';
import { type Detokenize, type FinishReason, StopChecker } from './stop.js';

export interface GenerateRequest {
  /** Prompt token ids (at least one). */
  prompt: number[];
  maxNewTokens: number;
  /** Seed of this request's sampling Rng (the caller derives and records it). */
  seed: number;
  /** Default 1; 0 = greedy. */
  temperature?: number;
  /** Default 1 (no truncation). */
  topP?: number;
  stopTokens?: number[];
  stopStrings?: string[];
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

/** The new tokens of one forward: the prompts at prefill, one token per row afterwards. */
export interface DecodeStep {
  batch: number;
  /** New tokens per row (prompt length at prefill, 1 afterwards). */
  newLen: number;
  /** Positions already cached per row. */
  pastLen: number;
  /** [batch, newLen] */
  inputIds: BigInt64Array;
  /** [batch, newLen] */
  positionIds: BigInt64Array;
  /** [batch, pastLen + newLen]: 1 = attend, 0 = left padding. */
  attentionMask: Uint8Array;
}

/** One batch in flight: owns its KV cache. */
export interface DecodeState {
  /** Runs the model on the new tokens; returns the logits of each row's last new position [batch, V]. */
  forward(step: DecodeStep): Promise<Float32Array>;
  /** Keeps only rows `keep` (ascending) of the cache: finished rows stop costing compute. */
  keepRows(keep: number[]): void;
}

/** What the decode loop needs from a model; the graph sessions live behind it. */
export interface DecodeBackend {
  readonly vocabSize: number;
  readonly maxPositions: number;
  /** Starts a batch whose cache will never hold more than `capacity` positions per row. */
  begin(batch: number, capacity: number): DecodeState;
}

/** A request the model cannot serve (prompt too long, bad options); names the request and the problem. */
export class GenerateRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GenerateRequestError';
  }
}

interface Row {
  request: number;
  promptLen: number;
  rng: Rng;
  sampling: SamplingOptions;
  stop: StopChecker;
  logprobs: number[];
  policyLogprobs: number[];
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

/** Keeps rows `keep` of a [rows, ...] tensor whose row stride is `stride`. */
export function gatherRows<T extends Float32Array | Uint8Array>(data: T, stride: number, keep: number[]): T {
  const out = new (data.constructor as new (n: number) => T)(keep.length * stride);
  keep.forEach((r, i) => {
    out.set(data.subarray(r * stride, (r + 1) * stride), i * stride);
  });
  return out;
}

/** Decodes a batch of requests together; results come back in request order. */
export async function decodeBatch(
  backend: DecodeBackend,
  requests: GenerateRequest[],
  detokenize?: Detokenize,
): Promise<GenerateResult[]> {
  if (requests.length === 0) return [];
  const rows: Row[] = requests.map((req, i) => {
    const maxNew = checkRequest(req, backend, i);
    return {
      request: i,
      promptLen: req.prompt.length,
      rng: new Rng(req.seed),
      sampling: { temperature: req.temperature ?? 1, topP: req.topP ?? 1 },
      stop: new StopChecker({ stopTokens: req.stopTokens, stopStrings: req.stopStrings }, maxNew, detokenize),
      logprobs: [],
      policyLogprobs: [],
    };
  });
  const results: GenerateResult[] = new Array(requests.length);
  const V = backend.vocabSize;

  // Prefill: left-pad prompts to the longest; positions count real tokens only.
  const L = Math.max(...rows.map((r) => r.promptLen));
  let active = rows;
  let B = rows.length;
  let inputIds = new BigInt64Array(B * L);
  let positionIds = new BigInt64Array(B * L);
  let mask = new Uint8Array(B * L);
  rows.forEach((row, b) => {
    const pad = L - row.promptLen;
    requests[row.request].prompt.forEach((id, t) => {
      inputIds[b * L + pad + t] = BigInt(id);
      positionIds[b * L + pad + t] = BigInt(t);
      mask[b * L + pad + t] = 1;
    });
  });
  let pastLen = 0;
  let newLen = L;
  const state = backend.begin(B, L + Math.max(...rows.map((r) => r.stop.maxNewTokens)));

  for (;;) {
    const logits = await state.forward({
      batch: B,
      newLen,
      pastLen,
      inputIds,
      positionIds,
      attentionMask: mask,
    });
    pastLen += newLen;

    // Sample one token per active row.
    const next: number[] = [];
    const keep: number[] = [];
    active.forEach((row, b) => {
      const s: Sample = sampleRow(logits, b * V, V, row.sampling, row.rng);
      row.logprobs.push(s.logprob);
      row.policyLogprobs.push(s.policyLogprob);
      const finish = row.stop.push(s.token);
      if (finish) {
        results[row.request] = {
          tokens: row.stop.generated,
          logprobs: row.logprobs,
          policyLogprobs: row.policyLogprobs,
          finishReason: finish,
          ...(row.stop.matched !== undefined ? { stopString: row.stop.matched } : {}),
        };
      } else {
        keep.push(b);
        next.push(s.token);
      }
    });
    if (keep.length === 0) return results;

    // Drop finished rows from the cache and the mask.
    if (keep.length < B) {
      state.keepRows(keep);
      mask = gatherRows(mask, pastLen, keep);
      active = keep.map((b) => active[b]);
      B = keep.length;
    }

    // One step: the sampled token of each row, at its own next position.
    inputIds = BigInt64Array.from(next, (id) => BigInt(id));
    positionIds = BigInt64Array.from(active, (row) => BigInt(row.promptLen + row.stop.generated.length - 1));
    const grown = new Uint8Array(B * (pastLen + 1));
    for (let b = 0; b < B; b++) {
      grown.set(mask.subarray(b * pastLen, (b + 1) * pastLen), b * (pastLen + 1));
      grown[b * (pastLen + 1) + pastLen] = 1;
    }
    mask = grown;
    newLen = 1;
  }
}
