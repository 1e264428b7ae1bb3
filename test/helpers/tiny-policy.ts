import { type GPTConfig, initParams, type Params } from '../../src/gpu/config.js';

/** A tiny GPT whose weights are scaled up from the GPT-2 init so its distributions are far from uniform. */
export const TINY_CFG: GPTConfig = {
  vocab_size: 13,
  n_embd: 8,
  n_layer: 2,
  n_head: 2,
  n_positions: 24,
  layer_norm_epsilon: 1e-5,
  activation_function: 'gelu_new',
};

/** The smallest train graph's shape (one block, vocab 11): the lm-head, in-place and graph-digest checks. */
export const ONE_BLOCK_CFG: GPTConfig = {
  vocab_size: 11,
  n_embd: 8,
  n_layer: 1,
  n_head: 2,
  n_positions: 8,
  layer_norm_epsilon: 1e-5,
  activation_function: 'gelu_new',
};

export function tinyParams(seed = 1, cfg: GPTConfig = TINY_CFG, scale = 40): Params {
  const p = initParams(cfg, seed);
  for (const [name, v] of p) {
    if (/ln_\w+\.weight$/.test(name)) continue;
    for (let i = 0; i < v.length; i++) v[i] *= scale;
    if (name.endsWith('.bias')) for (let i = 0; i < v.length; i++) v[i] = 0.1 * Math.sin(i + name.length);
  }
  return p;
}
