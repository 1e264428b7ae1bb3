/**
 * Sampler benchmark (issue 13 item 5): is sampling the decode bottleneck at batch 64?
 *
 * One decode of `--batch` world prompts (with-tool path, no stop tokens, so every step runs at
 * the full batch) on the base policy records the logits of every step. Then, in this process:
 *   - the pre-issue-13 sampler (bench/sampler-baseline.ts) and the current one sample the recorded
 *     logits with the same seeds, interleaved, `--repeats` times: their times, the ratio, and a
 *     check that both drew identical samples;
 *   - decodeBatch runs the same requests `--repeats` times (current sampler inline): the decode
 *     wall time, and the sampler's share of it (current sampler time / decode time).
 * Times are CPU time of this process (all threads, ORT's included: with --threads 1 the decode
 * runs on one core), which a shared, loaded machine disturbs far less than wall time. Medians.
 *
 *   npm run build && node dist/bench/sampler.js [--batch 64] [--new 64] [--repeats 7]
 *     [--checkpoint assets/base] [--threads 1] [--settings 1:1,1:0.9,0.7:1,0.7:0.9] [--json]
 * (--settings: temperature:topP pairs; the first is the paper's default, T 1 and top-p 1.)
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { loadCheckpoint } from '../src/gpu/checkpoint.js';
import { type DecodeBackend, decodeBatch, type GenerateRequest } from '../src/gpu/decoder.js';
import { OrtDecodeBackend } from '../src/gpu/ort-policy.js';
import { type Sample, type SamplingOptions, sampleRow } from '../src/gpu/sampler.js';
import { promptIds } from '../src/text/prompts.js';
import { deriveSeed, Rng } from '../src/util/rng.js';
import { DEFAULT_WORLD } from '../src/world/config.js';
import { generateWorld } from '../src/world/generate.js';
import { median } from './probe.js';
import { sampleRowBaseline } from './sampler-baseline.js';

const { values: flags } = parseArgs({
  options: {
    batch: { type: 'string', default: '64' },
    new: { type: 'string', default: '64' },
    repeats: { type: 'string', default: '7' },
    checkpoint: { type: 'string', default: 'assets/base' },
    threads: { type: 'string', default: '1' },
    settings: { type: 'string', default: '1:1,1:0.9,0.7:1,0.7:0.9' },
    json: { type: 'boolean', default: false },
  },
});
const B = Number(flags.batch);
const maxNew = Number(flags.new);
const repeats = Math.max(1, Number(flags.repeats));
const settings: SamplingOptions[] = flags.settings.split(',').map((s) => {
  const [temperature, topP] = s.split(':').map(Number);
  return { temperature, topP };
});

const ckpt = await loadCheckpoint(flags.checkpoint);
const backend = await OrtDecodeBackend.create(ckpt.config, ckpt.params, {
  device: 'cpu',
  intraOpThreads: Number(flags.threads),
});
const V = backend.vocabSize;
const world = generateWorld({ ...DEFAULT_WORLD, seed: 0 });
const questions = world.questions.filter((q) => q.split === 'train');
const requests = (opts: SamplingOptions): GenerateRequest[] =>
  Array.from({ length: B }, (_, i) => ({
    prompt: promptIds(world.tokenizer, 'with-tool', questions[i % questions.length].question),
    maxNewTokens: maxNew,
    seed: deriveSeed(0, 'bench-sampler', i),
    ...opts,
  }));

/** The logits of every decode step ([rows, V] each) of one decode of `reqs`. */
async function recordLogits(reqs: GenerateRequest[]): Promise<Float32Array[]> {
  const steps: Float32Array[] = [];
  const recording: DecodeBackend = {
    vocabSize: V,
    maxPositions: backend.maxPositions,
    paramsVersion: backend.paramsVersion,
    open() {
      const batch = backend.open();
      const keep = (logits: Float32Array) => {
        steps.push(logits.slice());
        return logits;
      };
      return {
        version: batch.version,
        get size() {
          return batch.size;
        },
        prefill: async (prompts, slots) => keep(await batch.prefill(prompts, slots)),
        step: async (tokens) => keep(await batch.step(tokens)),
        keepRows: (rows) => batch.keepRows(rows),
      };
    },
  };
  await decodeBatch(recording, reqs);
  return steps;
}

type RowSampler = typeof sampleRow;
/** CPU milliseconds of this process since `from` (all threads: ORT's included). */
function cpuMs(from: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
}

/** Samples every recorded row with per-request Rngs (as the decode loop does); CPU time and samples. */
function sampleAll(sampler: RowSampler, steps: Float32Array[], opts: SamplingOptions) {
  const rngs = Array.from({ length: B }, (_, i) => new Rng(deriveSeed(1, i)));
  const out: Sample[] = [];
  const t0 = process.cpuUsage();
  for (const logits of steps) {
    const rows = logits.length / V;
    for (let b = 0; b < rows; b++) out.push(sampler(logits, b * V, V, opts, rngs[b]));
  }
  return { ms: cpuMs(t0), out };
}

const sameSamples = (a: Sample[], b: Sample[]) =>
  a.length === b.length &&
  a.every(
    (s, i) =>
      s.token === b[i].token &&
      Object.is(s.logprob, b[i].logprob) &&
      Object.is(s.policyLogprob, b[i].policyLogprob) &&
      Object.is(s.drawLogprob, b[i].drawLogprob),
  );

const loadBefore = loadavg()[0];
const results = [];
for (const opts of settings) {
  const reqs = requests(opts);
  const steps = await recordLogits(reqs);
  const rows = steps.reduce((a, l) => a + l.length / V, 0);
  const oldMs: number[] = [];
  const newMs: number[] = [];
  const decodeMs: number[] = [];
  let identical = true;
  sampleAll(sampleRowBaseline, steps, opts); // warm-up
  sampleAll(sampleRow, steps, opts);
  for (let r = 0; r < repeats; r++) {
    const before = sampleAll(sampleRowBaseline, steps, opts);
    const after = sampleAll(sampleRow, steps, opts);
    identical &&= sameSamples(before.out, after.out);
    oldMs.push(before.ms);
    newMs.push(after.ms);
    const t0 = process.cpuUsage();
    await decodeBatch(backend, reqs);
    decodeMs.push(cpuMs(t0));
  }
  const res = {
    temperature: opts.temperature,
    topP: opts.topP,
    rows,
    oldMs: median(oldMs),
    newMs: median(newMs),
    speedup: median(oldMs.map((o, i) => o / newMs[i])),
    decodeMs: median(decodeMs),
    share: median(newMs.map((n, i) => n / decodeMs[i])),
    identical,
  };
  results.push(res);
  if (!flags.json) {
    const f = (x: number, d = 1) => x.toFixed(d);
    console.log(
      `T ${opts.temperature} top-p ${opts.topP}: ${rows} rows; sampler old ${f(res.oldMs)} ms, new ${f(res.newMs)} ms, ` +
        `new/old speedup ${f(res.speedup, 2)}x; decode ${f(res.decodeMs)} ms, sampler share ${f(100 * res.share)}%` +
        `${identical ? '' : '  SAMPLES DIFFER'}`,
    );
  }
}
const load = [loadBefore, loadavg()[0]];
if (flags.json) console.log(JSON.stringify({ batch: B, maxNew, repeats, load, results }));
else
  console.log(
    `batch ${B}, ${maxNew} new tokens, medians of ${repeats}; load average ${load.map((l) => l.toFixed(1)).join(' -> ')}`,
  );
await backend.release();
if (results.some((r) => !r.identical)) process.exit(1);
