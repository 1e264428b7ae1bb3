/**
 * trainStepPeak (src/gpu/memory.ts), the training step's predicted peak resident memory: its
 * terms hand-worked for the Qwen3-shaped 103M policy of bench/train-memory.ts, and the prediction
 * within 20% of the peaks that bench measured (BENCHMARKS.md, "Training memory": arena off, or one
 * step, where the arena made no difference), shapes outside the fit included.
 * The constants were fitted to the 8-layer rows; the others were not used to fit them.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parsePolicyConfig } from '../src/gpu/architecture.js';
import { trainStepPeak } from '../src/gpu/memory.js';

const base = JSON.parse(readFileSync(new URL('../bench/configs/qwen3-0.6b.json', import.meta.url), 'utf8'));
const shape = (layers: number, vocab = 151_936) =>
  parsePolicyConfig({
    ...base,
    hidden_size: 512,
    num_hidden_layers: layers,
    num_attention_heads: 8,
    num_key_value_heads: 4,
    head_dim: 64,
    intermediate_size: 1536,
    vocab_size: vocab,
  });

t.test('the terms at 4 x 64, default chunk (hand-worked)', async (t) => {
  const e = trainStepPeak(shape(8), { batch: 4, seq: 64 });
  t.equal(e.chunk, 110, '64 MiB / (151,936 x 4 B) = 110 rows < 252: chunked');
  t.equal(e.runtime, 125_829_120);
  t.equal(e.state, 5 * 102_966_784 * 4); // 2,059,335,680
  t.equal(e.folded, 0, 'chunked and tied: no [N, V] zeros, no [V, D] zeros (fuseTiedGradient)');
  t.equal(e.activations, 8 * 4 * 64 * 60 * 512 * 4); // 251,658,240
  t.equal(e.head, 311_164_928 + 251_658_240 + 2 * 110 * 151_936 * 4); // 696,526,848
  t.equal(e.embedding, 3 * 311_164_928); // 933,494,784: the larger phase
  t.equal(e.peak, 125_829_120 + 2_059_335_680 + 933_494_784); // 3,118,659,584 = 2.90 GiB
  const unchunked = trainStepPeak(shape(8), { batch: 4, seq: 64, logitsChunk: 252 });
  t.equal(unchunked.folded, 311_164_928 + 252 * 151_936 * 4, 'unchunked: [V, D] and [N, V] zeros');
  t.equal(unchunked.embedding, 4 * 311_164_928, 'unchunked: the Sum of the two [V, D] parts too');
  t.equal(unchunked.head, 311_164_928 + 251_658_240 + 3.9 * 252 * 151_936 * 4);
});

// [layers, vocab, batch, seq, logitsChunk (undefined: default), measured peak GiB]
const MEASURED: Array<[number, number, number, number, number | undefined, number]> = [
  [8, 151_936, 4, 64, undefined, 2.92],
  [8, 151_936, 4, 64, 252, 3.57],
  [8, 151_936, 4, 256, undefined, 3.44],
  [8, 151_936, 4, 256, 1020, 6.38],
  // Shapes outside the fit (the unchunked ones: one step with the arena on, no second-step growth).
  [1, 151_936, 4, 64, 252, 3.12],
  [4, 151_936, 4, 64, 252, 3.35],
  [1, 151_936, 4, 256, 1020, 5.91],
  [8, 8192, 4, 64, 252, 0.83],
  // Chunked, two steps, arena off, after the fit.
  [4, 151_936, 4, 64, 64, 2.63],
  [1, 151_936, 4, 256, 64, 2.54],
];

t.test('within 20% of every peak bench/train-memory.ts measured', async (t) => {
  for (const [layers, vocab, batch, seq, logitsChunk, gib] of MEASURED) {
    const got = trainStepPeak(shape(layers, vocab), { batch, seq, logitsChunk }).peak / 2 ** 30;
    const err = Math.abs(got - gib) / gib;
    t.ok(
      err <= 0.2,
      `L${layers} V${vocab} ${batch}x${seq} chunk ${logitsChunk ?? 'default'}: ${got.toFixed(2)} vs ${gib} GiB (${(100 * err).toFixed(0)}%)`,
    );
  }
});
