/**
 * The sampler as it was before issue 13 (src/gpu/sampler.ts at f90e83d), kept verbatim as the
 * baseline bench/sampler.ts times the current one against, and as the oracle
 * test/gpu-runtime-sampler.test.ts checks it equals bit for bit: two temperature passes of
 * Math.exp, a full sort of the vocabulary for top-p, a closure per row.
 */
import { type Sample, SamplingError, type SamplingOptions } from '../src/gpu/sampler.js';
import type { Rng } from '../src/util/rng.js';

// Scratch space reused across calls (one per thread: workers have their own module instance).
let probs = new Float64Array(0);
let sorted = new Float64Array(0);

/** Samples one row: logits[offset .. offset + vocab) (the pre-issue-13 implementation). */
export function sampleRowBaseline(
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

  // Temperature 1 log-normaliser: policyLogprob for whichever token is chosen.
  let z1 = 0;
  for (let i = 0; i < vocab; i++) z1 += Math.exp(logits[offset + i] - max);
  const logZ1 = Math.log(z1);
  const policyLogprobOf = (tok: number) => logits[offset + tok] - max - logZ1;

  if (opts.temperature === 0) {
    const lp = policyLogprobOf(argmax);
    return { token: argmax, logprob: lp, policyLogprob: lp, drawLogprob: 0 };
  }

  if (probs.length < vocab) {
    probs = new Float64Array(vocab);
    sorted = new Float64Array(vocab);
  }
  // Unnormalised temperature-scaled probabilities p_i = exp((l_i - max) / T), max entry 1.
  const invT = 1 / opts.temperature;
  let z = 0;
  for (let i = 0; i < vocab; i++) {
    const p = Math.exp((logits[offset + i] - max) * invT);
    probs[i] = p;
    z += p;
  }

  // Nucleus: the smallest set of most likely tokens whose mass reaches topP. Tokens tied with the
  // last one admitted are all kept, so the set does not depend on token order.
  let cutoff = 0;
  let mass = z;
  if (opts.topP < 1) {
    const s = sorted.subarray(0, vocab);
    s.set(probs.subarray(0, vocab));
    s.sort().reverse();
    const target = opts.topP * z;
    let acc = 0;
    for (let k = 0; k < vocab; k++) {
      acc += s[k];
      if (acc >= target) {
        cutoff = s[k];
        break;
      }
    }
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
    policyLogprob: policyLogprobOf(token),
    drawLogprob: Math.log(probs[token] / mass),
  };
}
