/**
 * The decode step of two policy versions' batches (issue 25 item 3): each batch stepped on its own
 * (one session.run per version, the batcher before) against both in one pass (stepMany: one run of
 * two copies of the step graph, src/gpu/shared-step.ts), interleaved in the same process, medians.
 * The committed base policy, batch-invariant (the runs' default), 1 intra-op thread; every row's
 * prompt 30-39 tokens, then `--steps` steps per timed block.
 *
 *   npm run build && node dist/bench/shared-step.js [--rows 4,12,24] [--repeats 31] [--steps 60]
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { loadCheckpoint } from '../src/gpu/checkpoint.js';
import type { RowBatch } from '../src/gpu/decoder.js';
import { OrtDecodeBackend } from '../src/gpu/ort-policy.js';
import { median } from './probe.js';

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string', default: '4,12,24' },
    repeats: { type: 'string', default: '31' },
    steps: { type: 'string', default: '60' },
    checkpoint: { type: 'string', default: 'assets/base' },
  },
});
const steps = Number(flags.steps);
const ckpt = await loadCheckpoint(flags.checkpoint);
const backend = await OrtDecodeBackend.create(
  ckpt.config,
  ckpt.params,
  { device: 'cpu', intraOpThreads: 1 },
  { batchInvariant: true },
);
backend.holdVersion(0, 2);
backend.setParams(new Map([...ckpt.params].map(([k, v]) => [k, v.map((x) => x * 0.99)])));
backend.holdVersion(1, 2);

async function twoBatches(n: number): Promise<RowBatch[]> {
  const batches: RowBatch[] = [];
  for (const v of [0, 1]) {
    const b = backend.open(v);
    const prompts = Array.from({ length: n }, (_, i) =>
      Array.from({ length: 30 + (i % 10) }, (_, t) => 5 + ((i * 7 + t) % 500)),
    );
    await b.prefill(
      prompts,
      prompts.map((p) => p.length + steps),
    );
    batches.push(b);
  }
  return batches;
}

console.log(
  `bench/shared-step: two versions, load ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
for (const n of flags.rows.split(',').map(Number)) {
  const separate: number[] = [];
  const shared: number[] = [];
  const tokens = Array.from({ length: n }, (_, i) => 7 + i);
  for (let rep = 0; rep < Number(flags.repeats); rep++) {
    for (const mode of ['separate', 'shared'] as const) {
      const batches = await twoBatches(n);
      const t0 = performance.now();
      for (let k = 0; k < steps; k++) {
        if (mode === 'separate') for (const b of batches) await b.step(tokens);
        else await backend.stepMany(batches.map((batch) => ({ batch, tokens })));
      }
      (mode === 'separate' ? separate : shared).push((performance.now() - t0) / steps);
    }
  }
  const [a, b] = [median(separate), median(shared)];
  console.log(
    `${n} rows per version: separate ${a.toFixed(3)} ms, one pass ${b.toFixed(3)} ms per step of both, separate / one pass ${(a / b).toFixed(2)}`,
  );
}
console.log(
  `load ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
await backend.release();
