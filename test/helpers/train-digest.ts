/**
 * Two training steps of a small generated GPT on one fixed batch, and the sha256 of the weights
 * they end on: what test/train-deterministic.test.ts compares across runs, threads and processes.
 * Run as a script (`node <ts loader> test/helpers/train-digest.ts THREADS`) it prints the digest,
 * so a fresh process can be compared with the test's own.
 *
 * The shape is chosen so ORT really splits the embedding gradient across two threads: its CPU
 * thread pool only parallelises a loop whose cost (rows x row width) is past ~2e5, so B x T = 4096
 * tokens of width 64, drawn from 8 ids (every embedding row receives ~500 updates).
 */
import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import type { GPTConfig } from '../../src/gpu/config.js';
import { initParams, type Params } from '../../src/gpu/config.js';
import type { TrainBatch } from '../../src/gpu/trainer.js';
import { Trainer } from '../../src/gpu/trainer.js';
import { Rng } from '../../src/util/rng.js';

export const DIGEST_B = 32;
export const DIGEST_T = 128;
export const DIGEST_CFG: GPTConfig = {
  vocab_size: 32,
  n_embd: 64,
  n_layer: 1,
  n_head: 2,
  n_positions: DIGEST_T,
  layer_norm_epsilon: 1e-5,
  activation_function: 'gelu_new',
};
export const DIGEST_HYPER = { lr: 1e-3 };
export const DIGEST_STEPS = 2;

export const digestParams = (): Params => initParams(DIGEST_CFG, 1);

export function digestBatch(): TrainBatch {
  const rng = new Rng(3);
  const n = DIGEST_B * (DIGEST_T - 1);
  return {
    inputIds: Array.from({ length: DIGEST_B * DIGEST_T }, () => rng.int(8)),
    lossMask: new Array<number>(n).fill(1),
    oldLogprobs: Array.from({ length: n }, () => -3 + 0.1 * rng.normal()),
    advantages: Array.from({ length: DIGEST_B }, () => rng.normal()),
    akbeWeight: Array.from({ length: DIGEST_B }, (_, i) => (i % 4 === 0 ? 1 : 0)),
  };
}

/** sha256 over every parameter, in name order (name, then its float32 bytes). */
export function weightsDigest(params: Params): string {
  const h = createHash('sha256');
  for (const name of [...params.keys()].sort()) {
    const v = params.get(name)!;
    h.update(name);
    h.update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  }
  return h.digest('hex');
}

/** DIGEST_STEPS steps on a fresh Trainer with `threads` intra-op threads: the weights' digest. */
export async function trainDigest(threads: number): Promise<string> {
  await using trainer = await Trainer.create(DIGEST_CFG, digestParams(), {
    batch: DIGEST_B,
    seq: DIGEST_T,
    session: { intraOpThreads: threads },
    hyper: DIGEST_HYPER,
  });
  const batch = digestBatch();
  for (let s = 0; s < DIGEST_STEPS; s++) await trainer.step(batch);
  return weightsDigest(trainer.getParams());
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write(`${await trainDigest(Number(process.argv[2] ?? 2))}\n`);
}
