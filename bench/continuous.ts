/**
 * Continuous batching benchmark (issue 13 item 4): multi-turn rollouts on the base policy, decoded
 * by the static batcher the policy ran before (bench/static-batcher.ts: a batch runs to its end,
 * whatever arrives meanwhile waits for the next) and by the continuous batcher (src/gpu/
 * continuous.ts: requests join the running batch at every step), in the same process.
 *
 * Each of `--rollouts` rollouts is a world question's with-tool prompt; a turn generates up to
 * `--new` tokens and stops at </search>, </answer> or <eos>; after </search> the rollout waits
 * for its search (0.5-1.5 x `--tool-ms`, seeded per call) and continues with a short <information> block appended, up to
 * `--turns` turns. Both batchers decode every request to the same tokens (checked), so the two
 * runs do the same work; what differs is how long rollouts wait for each other. Printed: the mean
 * time a rollout takes to complete (what continuous batching shortens: nobody waits for the
 * batch's longest row), the time until all are done (bound by the longest rollout either way)
 * and the CPU time, each static / continuous. A third run, the continuous batcher on a
 * batch-invariant backend (config batchInvariantDecode: a fixed cache length, prompts prefilled
 * alone, no one-row steps), prints what bit-reproducible decoding costs against the default
 * (its trajectories may differ from the others' at a draw near a boundary, so they are not compared).
 *
 *   npm run build && node dist/bench/continuous.js [--rollouts 64] [--turns 3] [--new 16]
 *     [--tool-ms 50] [--repeats 3] [--checkpoint assets/base] [--threads 1]
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { loadCheckpoint } from '../src/gpu/checkpoint.js';
import { ContinuousBatcher } from '../src/gpu/continuous.js';
import { decodeBatch, type GenerateRequest, type GenerateResult } from '../src/gpu/decoder.js';
import { OrtDecodeBackend } from '../src/gpu/ort-policy.js';
import { formatObservation } from '../src/retrieval/observation.js';
import { informationBlock, promptIds, stopIds } from '../src/text/prompts.js';
import { deriveSeed } from '../src/util/rng.js';
import { DEFAULT_WORLD } from '../src/world/config.js';
import { generateWorld } from '../src/world/generate.js';
import { median } from './probe.js';
import { Batcher } from './static-batcher.js';

const { values: flags } = parseArgs({
  options: {
    rollouts: { type: 'string', default: '64' },
    turns: { type: 'string', default: '3' },
    new: { type: 'string', default: '16' },
    'tool-ms': { type: 'string', default: '50' },
    repeats: { type: 'string', default: '3' },
    checkpoint: { type: 'string', default: 'assets/base' },
    threads: { type: 'string', default: '1' },
  },
});
const N = Number(flags.rollouts);
const turns = Number(flags.turns);
const maxNew = Number(flags.new);
const toolMs = Number(flags['tool-ms']);
const repeats = Math.max(1, Number(flags.repeats));

const ckpt = await loadCheckpoint(flags.checkpoint);
const backend = await OrtDecodeBackend.create(ckpt.config, ckpt.params, {
  device: 'cpu',
  intraOpThreads: Number(flags.threads),
});
const invariantBackend = await OrtDecodeBackend.create(
  ckpt.config,
  ckpt.params,
  {
    device: 'cpu',
    intraOpThreads: Number(flags.threads),
  },
  { batchInvariant: true },
);
const world = generateWorld({ ...DEFAULT_WORLD, seed: 0 });
const tok = world.tokenizer;
const questions = world.questions.filter((q) => q.split === 'train');
const stops = stopIds(tok);
const searchEnd = tok.tag['</search>'];

type Generate = (req: GenerateRequest) => Promise<GenerateResult>;

/** One rollout: its turns' token ids (to compare the two runs) and when it finished. */
async function rollout(
  i: number,
  generate: Generate,
  t0: number,
): Promise<{ tokens: number[]; doneMs: number }> {
  let context = promptIds(tok, 'with-tool', questions[i % questions.length].question);
  const out: number[] = [];
  for (let turn = 0; turn < turns; turn++) {
    const room = backend.maxPositions - context.length;
    if (room < 2) break;
    const r = await generate({
      prompt: context,
      maxNewTokens: Math.min(maxNew, room - 1),
      seed: deriveSeed(0, 'bench-continuous', i, turn),
      stopTokens: stops,
    });
    out.push(...r.tokens);
    if (r.tokens.at(-1) !== searchEnd) break;
    // The search call: a retrieval server's latency varies, here uniformly in [0.5, 1.5] x tool-ms.
    const latency = toolMs * (0.5 + (deriveSeed(1, i, turn) % 1000) / 1000);
    await new Promise((res) => setTimeout(res, latency));
    const passage = world.passages[(i * 7 + turn) % world.passages.length];
    const info = tok.encode(informationBlock(formatObservation([passage], { maxChars: 40 }))).slice(0, 12);
    context = [...context, ...r.tokens, ...info];
  }
  return { tokens: out, doneMs: performance.now() - t0 };
}

async function run(generate: Generate, close: () => Promise<void>) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const done = await Promise.all(Array.from({ length: N }, (_, i) => rollout(i, generate, t0)));
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await close();
  return {
    wall,
    meanDone: done.reduce((a, d) => a + d.doneMs, 0) / N,
    cpu: (cpu.user + cpu.system) / 1000,
    trajectories: done.map((d) => d.tokens),
  };
}

const staticRun = () => {
  const b = new Batcher((reqs) => decodeBatch(backend, reqs), { maxBatch: 64, windowMs: 3 });
  return run(
    (r) => b.generate(r),
    () => b.close(),
  );
};
const continuousRun = (on = backend) => {
  const b = new ContinuousBatcher(async () => on, { maxBatch: 64, maxBatchTokens: 8192, windowMs: 3 });
  return run(
    (r) => b.generate(r),
    () => b.close(),
  );
};

const load0 = loadavg()[0];
await continuousRun(); // warm-up
const walls: Record<'static' | 'continuous', number[]> = { static: [], continuous: [] };
const means: Record<'static' | 'continuous', number[]> = { static: [], continuous: [] };
const cpus: Record<'static' | 'continuous', number[]> = { static: [], continuous: [] };
const invariant = { wall: [] as number[], cpu: [] as number[] };
let same = true;
let searches = 0;
let tokens = 0;
for (let r = 0; r < repeats; r++) {
  const a = await staticRun();
  const b = await continuousRun();
  same &&= JSON.stringify(a.trajectories) === JSON.stringify(b.trajectories);
  walls.static.push(a.wall);
  walls.continuous.push(b.wall);
  means.static.push(a.meanDone);
  means.continuous.push(b.meanDone);
  cpus.static.push(a.cpu);
  cpus.continuous.push(b.cpu);
  const c = await continuousRun(invariantBackend);
  invariant.wall.push(c.wall);
  invariant.cpu.push(c.cpu);
  searches = b.trajectories.reduce((s, t) => s + t.filter((id) => id === searchEnd).length, 0);
  tokens = b.trajectories.reduce((s, t) => s + t.length, 0);
}
const f = (x: number) => x.toFixed(0);
const ratio = median(walls.static.map((s, i) => s / walls.continuous[i]));
const meanRatio = median(means.static.map((s, i) => s / means.continuous[i]));
console.log(
  `${N} rollouts, up to ${turns} turns of ${maxNew} tokens, ${searches} searches of ~${toolMs} ms, ${tokens} tokens; ` +
    `identical trajectories: ${same}`,
);
console.log(
  `mean rollout completion: static ${f(median(means.static))} ms, continuous ${f(median(means.continuous))} ms, ` +
    `static/continuous ${meanRatio.toFixed(2)}x`,
);
console.log(
  `all done (wall): static ${f(median(walls.static))} ms, continuous ${f(median(walls.continuous))} ms, static/continuous ${ratio.toFixed(2)}x; ` +
    `CPU: static ${f(median(cpus.static))} ms, continuous ${f(median(cpus.continuous))} ms`,
);
console.log(
  `batch-invariant (continuous): wall ${f(median(invariant.wall))} ms, CPU ${f(median(invariant.cpu))} ms; ` +
    `its cost against the default: wall ${median(invariant.wall.map((w, i) => w / walls.continuous[i])).toFixed(2)}x, ` +
    `CPU ${median(invariant.cpu.map((c, i) => c / cpus.continuous[i])).toFixed(2)}x`,
);
console.log(`medians of ${repeats}; load average ${load0.toFixed(1)} -> ${loadavg()[0].toFixed(1)}`);
await backend.release();
await invariantBackend.release();
if (!same) process.exit(1);
