/**
 * What a policy costs in memory, from its config alone (for `akbe policy info` and the scale
 * bench): weights, their gradients, AdamW's two moments, and a KV cache of a given batch and
 * context. Values are float32 on CPU (4 bytes); pass `bytes: 2` for a half-precision GPU copy.
 * Activations are not counted: they depend on the graph's schedule, so the bench measures them.
 */
import { architecture, countParams, type PolicyConfig } from './architecture.js';

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
