/**
 * Pretraining the base policy on a world's mix (pretrain-data.ts): next-token cross-entropy on the
 * mask-1 tokens, run through the GRPO+AKBE training graph with only the AKBE `nll` term switched on
 * (pg_weight 0, lambda 1, akbe_weight 1 / (the batch's mask-1 tokens): one token-mean, as
 * akbeRowWeights' 'pooled'), so pretraining and RL share one training step.
 *
 * The pure parts live here: the model config, the learning-rate schedule and the batch schedule.
 * Both schedules are functions of the step alone, so a resumed run replays exactly the batches an
 * uninterrupted run would have seen.
 *
 * Batches are length-bucketed: each epoch is a seeded permutation, cut into chunks of 32 batches;
 * a chunk is sorted by length and split, and the batches are shuffled. A batch is right-padded to
 * the smallest bucket that holds its longest sequence, so padding stays small and the trainer
 * keeps one graph per bucket.
 */

import type { GPTConfig } from '../gpu/config.js';
import { akbeRowWeights } from '../rl/batch.js';
import { deriveSeed, Rng } from '../util/rng.js';
import type { PretrainMix } from './pretrain-data.js';

export interface PretrainConfig {
  steps: number;
  /** Sequences per step. */
  batch: number;
  /** Peak learning rate (after warmup). */
  lr: number;
  /** Linear warmup steps. */
  warmup: number;
  /** The cosine decays to lr * minLrRatio at the last step. */
  minLrRatio: number;
  weightDecay: number;
  seed: number;
  /** Padded lengths a batch may take (ascending; the last is the context). */
  buckets: number[];
  nEmbd: number;
  nLayer: number;
  nHead: number;
}

export const DEFAULT_PRETRAIN: PretrainConfig = {
  steps: 2000, // the prototype needed ~800; this world (391 known facts, multi-hop, reading) ~2000
  batch: 64, // ~2.7k tokens per step at the mix's mean length of ~42
  lr: 3e-3, // a d64 model from scratch: high, with warmup and cosine decay
  warmup: 40,
  minLrRatio: 0.1,
  weightDecay: 0.01,
  seed: 0,
  buckets: [32, 64, 96, 128],
  nEmbd: 64, // the prototype's size: d64, 2 layers
  nLayer: 2,
  nHead: 4,
};

/**
 * Padded lengths for a context: DEFAULT_PRETRAIN's buckets below it, then the context itself
 * (128 gives the default's buckets; the hard world's 160 adds one).
 */
export function bucketsFor(context: number): number[] {
  return [...DEFAULT_PRETRAIN.buckets.filter((b) => b < context), context];
}

/** The policy's GPT-2 config for a world: its vocabulary, its longest sequence. */
export function pretrainModelConfig(vocabSize: number, cfg: PretrainConfig): GPTConfig {
  return {
    vocab_size: vocabSize,
    n_embd: cfg.nEmbd,
    n_layer: cfg.nLayer,
    n_head: cfg.nHead,
    n_positions: cfg.buckets[cfg.buckets.length - 1],
    layer_norm_epsilon: 1e-5,
    activation_function: 'gelu_new',
  };
}

/** Learning rate of step s (1-based): linear warmup to `lr`, then cosine down to `lr * minLrRatio`. */
export function lrAt(
  step: number,
  cfg: Pick<PretrainConfig, 'lr' | 'warmup' | 'steps' | 'minLrRatio'>,
): number {
  if (step <= cfg.warmup) return (cfg.lr * step) / Math.max(cfg.warmup, 1);
  const progress = Math.min(1, (step - cfg.warmup) / Math.max(1, cfg.steps - cfg.warmup));
  const min = cfg.lr * cfg.minLrRatio;
  return min + 0.5 * (cfg.lr - min) * (1 + Math.cos(Math.PI * progress));
}

export interface PlannedBatch {
  /** Sequence indices into the mix. */
  sequences: number[];
  /** Padded length. */
  seq: number;
}

const CHUNK_BATCHES = 32;

/** The batches of steps 1..cfg.steps, in order. */
export function batchSchedule(mix: PretrainMix, cfg: PretrainConfig): PlannedBatch[] {
  const n = mix.kinds.length;
  if (n < cfg.batch)
    throw new RangeError(`pretrain: the mix has ${n} sequences, fewer than one batch of ${cfg.batch}`);
  const len = (s: number) => mix.offsets[s + 1] - mix.offsets[s];
  const context = cfg.buckets[cfg.buckets.length - 1];
  for (let s = 0; s < n; s++) {
    if (len(s) > context)
      throw new RangeError(`pretrain: sequence ${s} has ${len(s)} tokens, more than the context ${context}`);
  }
  const out: PlannedBatch[] = [];
  for (let epoch = 0; out.length < cfg.steps; epoch++) {
    const rng = new Rng(deriveSeed(cfg.seed, 'pretrain-epoch', epoch));
    const perm = rng.shuffle(Array.from({ length: n }, (_, i) => i));
    const chunk = cfg.batch * CHUNK_BATCHES;
    for (let c = 0; c + cfg.batch <= perm.length; c += chunk) {
      const part = perm.slice(c, Math.min(c + chunk, perm.length));
      part.sort((a, b) => len(a) - len(b) || a - b);
      const batches: PlannedBatch[] = [];
      for (let b = 0; b + cfg.batch <= part.length; b += cfg.batch) {
        const sequences = part.slice(b, b + cfg.batch);
        const longest = Math.max(...sequences.map(len));
        batches.push({ sequences, seq: cfg.buckets.find((x) => x >= longest)! });
      }
      out.push(...rng.shuffle(batches));
    }
  }
  return out.slice(0, cfg.steps);
}

/** The training-graph inputs of a planned batch: [B, T] ids right-padded with `pad`, [B, T-1] loss mask. */
export function assembleBatch(mix: PretrainMix, planned: PlannedBatch, pad: number) {
  const B = planned.sequences.length;
  const T = planned.seq;
  const inputIds = new BigInt64Array(B * T).fill(BigInt(pad));
  const lossMask = new Float32Array(B * (T - 1));
  const rowTokens = new Array<number>(B).fill(0);
  planned.sequences.forEach((s, b) => {
    const a = mix.offsets[s];
    const L = mix.offsets[s + 1] - a;
    for (let t = 0; t < L; t++) inputIds[b * T + t] = BigInt(mix.tokens[a + t]);
    // Position t predicts token t+1: it is a target when token t+1 has mask 1.
    for (let t = 0; t + 1 < L; t++) {
      lossMask[b * (T - 1) + t] = mix.mask[a + t + 1];
      rowTokens[b] += mix.mask[a + t + 1];
    }
  });
  return {
    inputIds,
    lossMask,
    oldLogprobs: new Float32Array(B * (T - 1)),
    advantages: new Float32Array(B),
    pgWeight: new Float32Array(B), // no policy-gradient term
    // Every sequence is a cross-entropy target; one token-mean over the batch's mask-1 tokens.
    akbeWeight: Float32Array.from(akbeRowWeights(rowTokens, 'pooled')),
  };
}
