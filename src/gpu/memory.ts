/**
 * What a policy costs in memory, from its config alone (for `akbe policy info` and the scale
 * bench): weights, their gradients, AdamW's two moments, and a KV cache of a given batch and
 * context. Values are float32 on CPU (4 bytes); pass `bytes: 2` for a half-precision GPU copy.
 * memoryEstimate counts no activations (they depend on the graph's schedule); trainStepPeak
 * predicts a whole CPU training step's peak with constants fitted to bench/train-memory.ts.
 */
import { architecture, countParams, type PolicyConfig } from './architecture.js';
import { logitsChunkRows } from './lm-head.js';

export interface MemoryEstimate {
  parameters: number;
  weights: number;
  gradients: number;
  /** First and second moments. */
  adamw: number;
  /** Keys and values of every layer: 2 L B K T hd values. */
  kvCache: number;
  kvCachePerToken: number;
}

export function memoryEstimate(
  cfg: PolicyConfig,
  opts: { batch: number; context: number; bytes?: number },
): MemoryEstimate {
  const bytes = opts.bytes ?? 4;
  const arch = architecture(cfg);
  const parameters = countParams(cfg);
  const kvCachePerToken = 2 * arch.nLayer * arch.kvHeads * arch.headDim * bytes;
  return {
    parameters,
    weights: parameters * bytes,
    gradients: parameters * bytes,
    adamw: 2 * parameters * bytes,
    kvCache: kvCachePerToken * opts.batch * opts.context,
    kvCachePerToken,
  };
}

/** The terms of trainStepPeak, in bytes. */
export interface TrainStepPeak {
  peak: number;
  /** node, ORT and the session: a constant. */
  runtime: number;
  /** Five parameter-sized float32 arrays: the caller's, the trainer's, AdamW's two moments, the gradients. */
  state: number;
  /**
   * Zero tensors ORT's constant folding keeps: the unchunked head's [N, V], the embedding
   * gradient's [V, D] (none for a tied embedding with the head chunked: lm-head.ts fuseTiedGradient).
   */
  folded: number;
  /** The larger of the two phases below (they are not alive at once). */
  head: number;
  embedding: number;
  activations: number;
  /** Positions per chunk of the head (>= rows: unchunked). */
  chunk: number;
}

/** Constants of trainStepPeak, fitted to bench/train-memory.ts (BENCHMARKS.md, "Training memory"). */
export const TRAIN_PEAK_FIT = {
  runtimeBytes: 120 * 2 ** 20,
  /** Activation values kept per token per layer, in units of the width D. */
  activationsPerTokenLayer: 60,
  /** [N, V] blocks alive in the unchunked head's backward; [C, V] blocks per chunk when chunked. */
  unchunkedHeadBlocks: 3.9,
  chunkHeadBlocks: 2,
  /** [V, D] blocks of the embedding / tied head gradient at the step's end (scatter, sum, norm). */
  embeddingBlocks: 4,
  /** The same with a tied embedding's rows scattered into the chunked head's sum (no Sum). */
  fusedEmbeddingBlocks: 3,
};

/**
 * Predicted peak resident memory of a process running one float32 CPU training step (Trainer,
 * optimizer 'host', arena off, the default head chunk unless `logitsChunk`), N = B (T - 1) head rows:
 *   peak = runtime + 5 P 4 + folded + max(head phase, embedding phase)
 *   folded          = N V 4 (unchunked) + V D 4 (unless tied and chunked)
 *   head phase      = V D 4 (the head gradient's running sum) + activations + head blocks
 *   activations     = L B T (60 D) 4
 *   head blocks     = 2 C V 4 (chunked, C rows a chunk) | 3.9 N V 4 (unchunked)
 *   embedding phase = 4 V D 4 | 3 V D 4 (tied and chunked)
 * The constants are fitted to the Qwen3-shaped 103M policy at 4 x 64 and 4 x 256 (BENCHMARKS.md);
 * a model, not an account of every buffer.
 */
export function trainStepPeak(
  cfg: PolicyConfig,
  opts: { batch: number; seq: number; logitsChunk?: number },
): TrainStepPeak {
  const arch = architecture(cfg);
  const V = arch.vocabSize;
  const D = arch.paramShapes().find((s) => s.shape.length === 2 && s.shape[0] === V)!.shape[1];
  const rows = opts.batch * (opts.seq - 1);
  const chunk = logitsChunkRows(V, 4, opts.logitsChunk);
  const chunked = chunk < rows;
  const fused = chunked && !arch.paramShapes().some((s) => s.name === 'lm_head.weight'); // tied
  const f = TRAIN_PEAK_FIT;
  const runtime = f.runtimeBytes;
  const state = 5 * countParams(cfg) * 4;
  const folded = (fused ? 0 : V * D * 4) + (chunked ? 0 : rows * V * 4);
  const activations = arch.nLayer * opts.batch * opts.seq * f.activationsPerTokenLayer * D * 4;
  const blocks = chunked ? f.chunkHeadBlocks * chunk * V * 4 : f.unchunkedHeadBlocks * rows * V * 4;
  const head = V * D * 4 + activations + blocks;
  const embedding = (fused ? f.fusedEmbeddingBlocks : f.embeddingBlocks) * V * D * 4;
  const peak = runtime + state + folded + Math.max(head, embedding);
  return { peak, runtime, state, folded, head, embedding, activations, chunk };
}

/** Bytes in binary units with three significant digits: 2.22 GiB, 224 KiB, 96 B. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  let v = n;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toPrecision(3)} ${units[u]}`;
}
