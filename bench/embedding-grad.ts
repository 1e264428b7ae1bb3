/**
 * The embedding gradient's cost and repeatability (issue 22 item 3), in one process: the
 * ScatterND(reduction 'add') rule the Gather gradient used before (the baseline; its threads race
 * on duplicate rows) against the ScatterElements rule it uses now (src/gpu/graph/ops/gather.ts
 * gatherRowsGrad), both adding N rows of width D into a [V, D] table. Printed per shape: median
 * ms of each (interleaved runs), new / old, how many distinct outputs (sha256) each gave over
 * the repeats, and, for scale, one training step of the committed base policy at B x T = N of the
 * first shape (its embedding gradient is the new rule's), with the change's share of the step.
 *
 *   npm run build && node dist/bench/embedding-grad.js [--threads 2] [--repeats 20]
 *     [--shapes 604x64x4096,512x256x4096] [--steps 3] [--checkpoint assets/base]
 */
import { createHash } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type * as Ort from 'onnxruntime-node';
import { loadCheckpoint } from '../src/gpu/checkpoint.js';
import { Graph, ops } from '../src/gpu/graph/index.js';
import { createSession, loadOrt } from '../src/gpu/session.js';
import { Trainer } from '../src/gpu/trainer.js';
import { Rng } from '../src/util/rng.js';
import { median } from './probe.js';

const { values: flags } = parseArgs({
  options: {
    threads: { type: 'string', default: '2' },
    repeats: { type: 'string', default: '20' },
    shapes: { type: 'string', default: '604x64x4096,512x256x4096' },
    steps: { type: 'string', default: '3' },
    checkpoint: { type: 'string', default: 'assets/base' },
  },
});
const threads = Number(flags.threads);
const repeats = Math.max(1, Number(flags.repeats));
const ort = await loadOrt();

/** A session computing the [V, D] gradient from idx [N] and g [N, D] with one of the two rules. */
async function gradSession(rule: 'scatterND' | 'scatterElements', V: number, D: number, N: number) {
  const g = new Graph({ name: `embedding-grad-${rule}` });
  const idx = g.input('idx', 'int64', [N]);
  const dy = g.input('g', 'float32', [N, D]);
  const table = g.input('table', 'float32', [V, D]); // only its shape is read
  const zeros = ops.expandTo(g.scalar(0, 'float32'), [V, D]);
  const out =
    rule === 'scatterND'
      ? ops.scatterNDAdd(zeros, ops.unsqueeze(idx, [1]), dy)
      : ops.gatherRowsGrad(table, idx, dy);
  g.output(out, 'grad');
  return (await createSession(g.serialize(), { intraOpThreads: threads })).session;
}

/**
 * Median ms of one run of each session (runs interleaved, so both see the same load on a shared
 * machine) and how many distinct outputs each gave over `repeats` runs.
 */
async function timeBoth(sessions: Ort.InferenceSession[], feeds: Record<string, Ort.Tensor>) {
  const ms = sessions.map(() => [] as number[]);
  const digests = sessions.map(() => new Set<string>());
  for (const s of sessions) await s.run(feeds); // warm-up
  for (let r = 0; r < repeats; r++) {
    for (const [i, s] of sessions.entries()) {
      const t0 = performance.now();
      const out = await s.run(feeds);
      ms[i].push(performance.now() - t0);
      const v = out.grad.data as Float32Array;
      digests[i].add(
        createHash('sha256')
          .update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength))
          .digest('hex'),
      );
    }
  }
  return sessions.map((_, i) => ({ ms: median(ms[i]), distinct: digests[i].size }));
}

/** Median ms of a training step of the base policy on N = B x T tokens (B = N / 128). */
async function trainStepMs(N: number): Promise<number | undefined> {
  const ckpt = await loadCheckpoint(flags.checkpoint, { optimizer: false });
  const T = 128;
  const B = N / T;
  if (!Number.isInteger(B)) return undefined;
  const V = (ckpt.config as { vocab_size: number }).vocab_size;
  const rng = new Rng(5);
  await using trainer = await Trainer.create(ckpt.config, ckpt.params, {
    batch: B,
    seq: T,
    session: { intraOpThreads: threads },
  });
  const batch = {
    inputIds: Array.from({ length: N }, () => rng.int(V)),
    lossMask: new Array<number>(B * (T - 1)).fill(1),
    oldLogprobs: Array.from({ length: B * (T - 1) }, () => -6 + rng.normal()),
    advantages: Array.from({ length: B }, () => rng.normal()),
  };
  await trainer.step(batch); // warm-up
  const ms: number[] = [];
  for (let s = 0; s < Number(flags.steps); s++) ms.push((await trainer.step(batch)).ms);
  return median(ms);
}

console.log(`threads ${threads}, ${repeats} repeats, load average ${loadavg()[0].toFixed(1)}`);
console.log('V x D x N | ScatterND ms (distinct) | ScatterElements ms (distinct) | new / old');
let firstDelta: number | undefined;
for (const shape of flags.shapes.split(',')) {
  const [V, D, N] = shape.split('x').map(Number);
  const rng = new Rng(7);
  // Few distinct ids, so rows are hit many times (as a small vocabulary's embedding is).
  const feeds = {
    idx: new ort.Tensor(
      'int64',
      BigInt64Array.from({ length: N }, () => BigInt(rng.int(Math.min(V, 64)))),
      [N],
    ),
    g: new ort.Tensor(
      'float32',
      Float32Array.from({ length: N * D }, () => rng.normal()),
      [N, D],
    ),
    table: new ort.Tensor('float32', new Float32Array(V * D), [V, D]),
  };
  const [old, now] = await timeBoth(
    [await gradSession('scatterND', V, D, N), await gradSession('scatterElements', V, D, N)],
    feeds,
  );
  console.log(
    `${shape} | ${old.ms.toFixed(2)} (${old.distinct}) | ${now.ms.toFixed(2)} (${now.distinct}) | ${(now.ms / old.ms).toFixed(2)}x`,
  );
  firstDelta ??= now.ms - old.ms;
}
const N0 = Number(flags.shapes.split(',')[0].split('x')[2]);
const stepMs = await trainStepMs(N0);
if (stepMs !== undefined)
  console.log(`base policy train step at N = ${N0}: ${stepMs.toFixed(0)} ms (median of ${flags.steps})`);
if (stepMs !== undefined && firstDelta !== undefined)
  console.log(`the change's share of that step: ${((100 * firstDelta) / stepMs).toFixed(1)}%`);
