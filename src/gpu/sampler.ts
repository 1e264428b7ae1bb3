/**
 * Batched next-token sampling from logits [B, V]: temperature, top-p (nucleus), greedy at
 * temperature 0, one seeded `Rng` per row (the caller derives and records each row's seed, so a
 * request samples the same tokens whichever batch it lands in).
 *
 * Three log-probabilities come back per token, because RL and debugging need different ones:
 * - `policyLogprob` = log softmax(logits)[token], temperature 1, no truncation: the policy's own
 *   probability, the one PPO/GRPO ratios pi_theta / pi_old compare against (the training graph
 *   scores tokens at temperature 1). This is what rollouts should record as old logprobs.
 * - `logprob` = log softmax(logits / T)[token]: temperature-scaled full softmax, WITHOUT top-p
 *   renormalisation (what vLLM-style engines report). At T = 0 it equals `policyLogprob`.
 * - `drawLogprob` = log of the probability the token was actually drawn with: temperature-scaled
 *   AND renormalised over the nucleus (0 for greedy, which is deterministic).
 * At T = 1 and top-p = 1 all three coincide.
 */
import type { Rng } from '../util/rng.js';

export interface SamplingOptions {
  /** 0 = greedy (argmax, ties to the lowest id); otherwise logits are divided by T. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables truncation. */
  topP: number;
}

export const DEFAULT_SAMPLING: SamplingOptions = { temperature: 1, topP: 1 };

export interface Sample {
  token: number;
  /** log softmax(logits / T)[token], full softmax (no top-p renormalisation); T = 1 when greedy. */
  logprob: number;
  /** log softmax(logits)[token] at temperature 1: the policy logprob for importance ratios. */
  policyLogprob: number;
  /** log probability under the distribution actually drawn from (temperature + nucleus). */
  drawLogprob: number;
}

/** Bad sampling options or logits that hold no usable distribution (NaN, all -Infinity). */
export class SamplingError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SamplingError';
  }
}

export function validateSampling(opts: SamplingOptions): void {
  if (!(opts.temperature >= 0) || !Number.isFinite(opts.temperature)) {
    throw new SamplingError(`temperature must be a finite number >= 0, got ${opts.temperature}`);
  }
  if (!(opts.topP > 0 && opts.topP <= 1))
    throw new SamplingError(`top-p must be in (0, 1], got ${opts.topP}`);
}

// Scratch space reused across calls (one per thread: workers have their own module instance).
let probs = new Float64Array(0);
let nucleus = new Float64Array(0);

/**
 * Samples one row: logits[offset .. offset + vocab). Three passes over the vocabulary: the max,
 * the exponentials (once: at T = 1 the temperature-1 and the sampling distributions are the same
 * numbers), the draw; top-p adds a selection of the nucleus without sorting the vocabulary.
 * Every sum adds the same values in the same order as the plain definition (bench/sampler-baseline.ts),
 * so each draw and each logprob is bit-identical to it (test/gpu-runtime-sampler.test.ts).
 */
export function sampleRow(
  logits: Float32Array,
  offset: number,
  vocab: number,
  opts: SamplingOptions,
  rng: Rng,
): Sample {
  let max = Number.NEGATIVE_INFINITY;
  let argmax = -1;
  for (let i = 0; i < vocab; i++) {
    const l = logits[offset + i];
    if (Number.isNaN(l)) throw new SamplingError(`logit ${i} is NaN: the policy produced no distribution`);
    if (l > max) {
      max = l;
      argmax = i;
    }
  }
  if (max === Number.NEGATIVE_INFINITY)
    throw new SamplingError('every logit is -Infinity: no token can be sampled');

  const T = opts.temperature;
  if (probs.length < vocab) {
    probs = new Float64Array(vocab);
    nucleus = new Float64Array(vocab);
  }
  // z1 normalises temperature 1 (policyLogprob); p_i = exp((l_i - max) / T), max entry 1, sums to z.
  let z1 = 0;
  let z = 0;
  if (T === 0) {
    for (let i = 0; i < vocab; i++) z1 += Math.exp(logits[offset + i] - max);
  } else if (T === 1) {
    for (let i = 0; i < vocab; i++) {
      const p = Math.exp(logits[offset + i] - max);
      probs[i] = p;
      z1 += p;
    }
    z = z1;
  } else {
    const invT = 1 / T;
    for (let i = 0; i < vocab; i++) {
      const d = logits[offset + i] - max;
      z1 += Math.exp(d);
      const p = Math.exp(d * invT);
      probs[i] = p;
      z += p;
    }
  }
  const logZ1 = Math.log(z1);
  if (T === 0) {
    const lp = logits[offset + argmax] - max - logZ1;
    return { token: argmax, logprob: lp, policyLogprob: lp, drawLogprob: 0 };
  }

  // Nucleus: the smallest set of most likely tokens whose mass reaches topP (ties with the last one
  // admitted all kept, so the set does not depend on token order); `cutoff` is its least p.
  const cutoff = opts.topP < 1 ? nucleusCutoff(vocab, opts.topP * z, ((1 - opts.topP) * z) / vocab) : 0;
  let mass = z;
  if (cutoff > 0) {
    mass = 0;
    for (let i = 0; i < vocab; i++) if (probs[i] >= cutoff) mass += probs[i];
  }

  // Inverse-CDF draw over the eligible tokens in id order.
  const u = rng.float() * mass;
  let acc = 0;
  let token = -1;
  for (let i = 0; i < vocab; i++) {
    const p = probs[i];
    if (p < cutoff || p === 0) continue;
    token = i;
    acc += p;
    if (acc > u) break;
  }
  return {
    token,
    logprob: Math.log(probs[token] / z),
    policyLogprob: logits[offset + token] - max - logZ1,
    drawLogprob: Math.log(probs[token] / mass),
  };
}

/**
 * The least probability in the nucleus: walking probs[0 .. vocab) from the largest down, the value
 * at which the running mass first reaches `target` (0 if rounding keeps it below). Only the head
 * of that order is sorted: the values >= `guess` first (everything below it holds less than
 * vocab * guess of the mass, so with guess = (1 - topP) z / V the walk nearly always ends there),
 * then the rest. The running mass adds the same values in the same order as a full sort would.
 */
function nucleusCutoff(vocab: number, target: number, guess: number): number {
  let acc = 0;
  for (const [lo, hi] of [
    [guess, Number.POSITIVE_INFINITY],
    [Number.NEGATIVE_INFINITY, guess],
  ]) {
    let n = 0;
    for (let i = 0; i < vocab; i++) {
      const p = probs[i];
      if (p >= lo && p < hi) nucleus[n++] = p;
    }
    const head = nucleus.subarray(0, n).sort(); // ascending: walk it from the end
    for (let k = n - 1; k >= 0; k--) {
      acc += head[k];
      if (acc >= target) return head[k];
    }
  }
  return 0;
}

/** Samples every row of logits [B, V] with that row's options and Rng. */
export function sampleBatch(
  logits: Float32Array,
  vocab: number,
  opts: readonly SamplingOptions[],
  rngs: readonly Rng[],
): Sample[] {
  const rows = logits.length / vocab;
  if (!Number.isInteger(rows) || rows !== opts.length || rows !== rngs.length) {
    throw new SamplingError(
      `logits hold ${logits.length / vocab} rows of ${vocab}, but ${opts.length} options and ${rngs.length} rngs were given`,
    );
  }
  const out: Sample[] = [];
  for (let b = 0; b < rows; b++) out.push(sampleRow(logits, b * vocab, vocab, opts[b], rngs[b]));
  return out;
}
