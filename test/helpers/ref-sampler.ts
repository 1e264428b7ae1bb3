/**
 * An independent reference for temperature + top-p (nucleus) sampling, written from the
 * definitions (Holtzman et al. 2019) on the float64 reference model (ref-gpt.ts), so tests can
 * check that a sampled sequence under a fixed seed is the one those settings define:
 *
 *   q_i  = softmax(logprobs / T)_i
 *   N    = the smallest set of most likely tokens whose q-mass reaches top-p (ties all kept)
 *   draw = inverse CDF of q restricted to N and renormalised, tokens in id order,
 *          at u = Rng(seed).float() (one uniform per token: the generator is known-answer tested)
 *
 * It shares nothing with src/gpu/sampler.ts but the uniform stream.
 */
import type { GPTConfig, Params } from '../../src/gpu/config.js';
import { Rng } from '../../src/util/rng.js';
import { refNextLogprobs } from './ref-gpt.js';

export interface RefDraw {
  token: number;
  /** log q_token: temperature-scaled, no nucleus renormalisation. */
  logprob: number;
  /** log softmax(logits)_token at temperature 1. */
  policyLogprob: number;
}

/** One draw from next-token log-probabilities `lp` (temperature 1). */
export function refDraw(lp: readonly number[], temperature: number, topP: number, u: number): RefDraw {
  const scaled = lp.map((x) => x / temperature);
  const top = Math.max(...scaled);
  const w = scaled.map((x) => Math.exp(x - top));
  const z = w.reduce((a, b) => a + b, 0);
  const q = w.map((x) => x / z);
  const byMass = q.map((p, i) => ({ p, i })).sort((a, b) => b.p - a.p);
  const keep = new Set<number>();
  let mass = 0;
  let last = Number.POSITIVE_INFINITY;
  for (const { p, i } of byMass) {
    if (mass >= topP && p < last) break;
    keep.add(i);
    mass += p;
    last = p;
  }
  let acc = 0;
  let token = -1;
  for (let i = 0; i < q.length; i++) {
    if (!keep.has(i)) continue;
    token = i;
    acc += q[i] / mass;
    if (acc > u) break;
  }
  return { token, logprob: Math.log(q[token]), policyLogprob: lp[token] };
}

/** `maxNew` tokens after `prompt`, sampled with `new Rng(seed)` (no stop tokens). */
export function refSample(
  cfg: GPTConfig,
  params: Params,
  prompt: readonly number[],
  opts: { maxNew: number; seed: number; temperature: number; topP: number },
): RefDraw[] {
  const rng = new Rng(opts.seed);
  const ctx = [...prompt];
  const out: RefDraw[] = [];
  for (let k = 0; k < opts.maxNew; k++) {
    const d = refDraw(refNextLogprobs(cfg, params, ctx), opts.temperature, opts.topP, rng.float());
    out.push(d);
    ctx.push(d.token);
  }
  return out;
}
