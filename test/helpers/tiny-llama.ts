/**
 * Tiny Llama-family configs as the config.json files transformers writes (parsed by the code
 * under test), and random weights far from the std-0.02 init so the models' distributions are far
 * from uniform and a wrong formula cannot hide in flat logprobs.
 */
import { readFileSync } from 'node:fs';
import { architecture } from '../../src/gpu/architecture.js';
import type { Params } from '../../src/gpu/config.js';
import { isNormWeight, type LlamaConfig } from '../../src/gpu/llama-config.js';
import { Rng } from '../../src/util/rng.js';

/**
 * The tiny configs are config.json files transformers would write (bench/configs/tiny-*.json,
 * shared with scripts/gpu-check.ts): qwen3 has GQA (4 query heads share 2 KV heads), head_dim 6
 * != hidden/heads = 3, q/k norm and a tied head; qwen2 q/k/v biases (o_proj none), no head_dim key
 * (hidden / heads = 4), untied; llama one KV head for four query heads, biases everywhere,
 * untied, Llama 3's rope_theta.
 */
const configJson = (family: string) =>
  JSON.parse(readFileSync(new URL(`../../bench/configs/tiny-${family}.json`, import.meta.url), 'utf8')) as {
    architectures: string[];
  } & Record<string, unknown>;

export const TINY_LLAMA_JSON = {
  qwen3: configJson('qwen3'),
  qwen2: configJson('qwen2'),
  llama: configJson('llama'),
};

/** Norm weights 1 + 0.2 N(0, 1); every other tensor (biases included) `std` N(0, 1). */
export function tinyLlamaParams(cfg: LlamaConfig, seed: number, std = 0.5): Params {
  const rng = new Rng(seed);
  return new Map(
    architecture(cfg)
      .paramShapes()
      .map(({ name, shape }) => {
        const n = shape.reduce((a, b) => a * b, 1);
        const [base, s] = isNormWeight(name) ? [1, 0.2] : [0, std];
        return [name, Float32Array.from({ length: n }, () => base + s * rng.normal())];
      }),
  );
}
