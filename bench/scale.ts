/**
 * Scale benchmark: a randomly initialised Qwen3-0.6B-shaped policy (bench/configs/qwen3-0.6b.json:
 * 28 layers, hidden 1024, 16 query / 8 KV heads of 128, vocab 151,936; 596M parameters) on this
 * machine, in one process:
 *   0. baseline: one 2048^3 float32 MatMul (the practical peak of ORT here, under the same load);
 *   1. forward (scoring) tokens/s at B x T = 4 x 128, and its GFLOP/s as a share of the peak;
 *   2. decode tokens/s at batch 1 and batch 16 (prefill of an 8-token prompt included) and the
 *      batch-16 / batch-1 ratio;
 *   3. a training step (GRPO + AKBE loss, backward, AdamW) at B x T = 2 x 64 on the same shape
 *      cut to --train-layers layers (default 4: the full 28 need ~20 GB for parameters, gradients
 *      and AdamW state in and out, more than a shared 24 GB box should give one process); widths,
 *      heads and the vocabulary are unchanged;
 *   4. peak resident memory after each phase (phases run in order of growing footprint).
 *
 *   npm run build && node dist/bench/scale.js [--device cpu|webgpu|cuda|auto] [--threads N]
 *     [--repeats N] [--train-layers L] [--decode-new N] [--train-only] [--json]
 *
 * FLOPs (stated): forward 2 N_mm tokens + 4 L H hd T^2 per sequence (the full T x T attention
 * products); training 3x that. N_mm = parameters that multiply activations (every matrix plus the
 * tied head; the embedding lookup costs nothing).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { architecture, countParams, parsePolicyConfig } from '../src/gpu/architecture.js';
import type { LlamaConfig } from '../src/gpu/llama-config.js';
import { memoryEstimate } from '../src/gpu/memory.js';
import { PolicyRuntime } from '../src/gpu/policy-runtime.js';
import { DEVICE_CHOICES, type DeviceChoice, type SessionConfig } from '../src/gpu/session.js';
import { Trainer } from '../src/gpu/trainer.js';
import { matmulProbe, median } from './probe.js';

const { values: flags } = parseArgs({
  options: {
    device: { type: 'string', default: 'cpu' },
    threads: { type: 'string', default: '0' },
    repeats: { type: 'string', default: '3' },
    'train-layers': { type: 'string', default: '4' },
    'decode-new': { type: 'string', default: '16' },
    config: {
      type: 'string',
      default: new URL('../../bench/configs/qwen3-0.6b.json', import.meta.url).pathname,
    },
    'train-only': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});
const device = flags.device as DeviceChoice;
if (!DEVICE_CHOICES.includes(device)) throw new Error(`--device must be one of ${DEVICE_CHOICES.join('|')}`);
const threads = Number(flags.threads);
const repeats = Math.max(1, Number(flags.repeats));
const newTokens = Number(flags['decode-new']);
const cfg = parsePolicyConfig(JSON.parse(readFileSync(flags.config, 'utf8')), flags.config) as LlamaConfig;
const trainCfg: LlamaConfig = { ...cfg, num_hidden_layers: Number(flags['train-layers']) };
const session: SessionConfig = {
  device,
  intraOpThreads: threads,
  log: (l) => process.stderr.write(`${l}\n`),
};
const log = (s: string) => process.stderr.write(`${s}\n`);
const rssGiB = () => process.resourceUsage().maxRSS / 1024 ** 2; // maxRSS is in KiB

/** Parameters that multiply activations: all rank-2 tensors but the embedding, plus a tied head. */
function matmulParams(c: LlamaConfig): number {
  const shapes = architecture(c).paramShapes();
  const n = shapes
    .filter((p) => p.shape.length === 2 && p.name !== 'model.embed_tokens.weight')
    .reduce((s, p) => s + p.shape[0] * p.shape[1], 0);
  return n + (c.tie_word_embeddings ? c.vocab_size * c.hidden_size : 0);
}
const forwardFlops = (c: LlamaConfig, B: number, T: number) =>
  B * (2 * matmulParams(c) * T + 4 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * T * T);

/** Seeded random weights, std initializer_range (the family's init; a fast hash, not the Rng). */
function randomParams(c: LlamaConfig) {
  const params = new Map<string, Float32Array>();
  let x = 0x9e3779b9;
  for (const { name, shape } of architecture(c).paramShapes()) {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    if (/norm\.weight$/.test(name)) data.fill(1);
    else
      for (let i = 0; i < data.length; i++) {
        x = (x * 1664525 + 1013904223) >>> 0; // uniform with the normal's std: same matmul cost
        data[i] = (x / 2 ** 32 - 0.5) * c.initializer_range * Math.sqrt(12);
      }
    params.set(name, data);
  }
  return params;
}

const [FB, FT] = [4, 128];

/** Phases 1 and 2 on the full model; its weights are dropped before training. */
async function inference(mm: { run: () => Promise<number> }, peak: number[]) {
  log(`initialising ${countParams(cfg).toLocaleString()} parameters`);
  const params = randomParams(cfg);
  const rssParams = rssGiB();

  // ---- 1. forward ----
  const rt = await PolicyRuntime.create(cfg, params, { ...session, maxBatch: 16 });
  const seqs = Array.from({ length: FB }, (_, b) =>
    Array.from({ length: FT }, (_, t) => (b * 7919 + t * 104729) % cfg.vocab_size),
  );
  await rt.logprobs(seqs.slice(0, 1).map((s) => s.slice(0, 8))); // session + warm-up
  const fwdMs: number[] = [];
  for (let r = 0; r < repeats; r++) {
    peak.push(await mm.run());
    const t0 = performance.now();
    await rt.logprobs(seqs);
    fwdMs.push(performance.now() - t0);
    log(`forward ${fwdMs.at(-1)!.toFixed(0)} ms`);
  }
  const rssForward = rssGiB();

  // ---- 2. decode at batch 1 and 16 ----
  const decodeRate = async (batch: number) => {
    const reqs = Array.from({ length: batch }, (_, i) => ({
      prompt: seqs[i % FB].slice(i, i + 8),
      maxNewTokens: newTokens,
      seed: i,
      temperature: 1,
    }));
    const rates: number[] = [];
    for (let r = 0; r < repeats; r++) {
      const t0 = performance.now();
      const out = await rt.generateBatch(reqs);
      const n = out.reduce((s, o) => s + o.tokens.length, 0);
      rates.push(n / ((performance.now() - t0) / 1000));
      log(`decode batch ${batch}: ${rates.at(-1)!.toFixed(2)} tok/s`);
    }
    return median(rates);
  };
  await rt.generateBatch([{ prompt: [1, 2], maxNewTokens: 2, seed: 0 }]); // decode sessions
  const decode1 = await decodeRate(1);
  const decode16 = await decodeRate(16);
  const rssDecode = rssGiB();
  await rt.close();
  return { fwd: median(fwdMs), decode1, decode16, rssParams, rssForward, rssDecode };
}

async function main(): Promise<void> {
  const mm = await matmulProbe(2048, session);
  const peak: number[] = [await mm.run()];
  log(`matmul peak ${peak[0].toFixed(1)} GFLOP/s`);
  const skipped = { fwd: Number.NaN, decode1: Number.NaN, decode16: Number.NaN };
  const inf = flags['train-only']
    ? { ...skipped, rssParams: Number.NaN, rssForward: Number.NaN, rssDecode: Number.NaN }
    : await inference(mm, peak);
  const { fwd, decode1, decode16, rssParams, rssForward, rssDecode } = inf;

  // ---- 3. training step on the cut model ----
  const [TB, TT] = [2, 64];
  const trainParams = randomParams(trainCfg);
  const t0 = performance.now();
  const trainer = await Trainer.create(trainCfg, trainParams, { batch: TB, seq: TT, session });
  const trainCreateMs = performance.now() - t0;
  const batch = {
    inputIds: BigInt64Array.from({ length: TB * TT }, (_, i) => BigInt((i * 7919) % cfg.vocab_size)),
    lossMask: new Float32Array(TB * (TT - 1)).fill(1),
    oldLogprobs: new Float32Array(TB * (TT - 1)).fill(-Math.log(cfg.vocab_size)),
    advantages: Float32Array.from({ length: TB }, (_, i) => (i % 2 ? 1 : -1)),
  };
  await trainer.step(batch); // warm-up
  const stepMs: number[] = [];
  for (let r = 0; r < repeats; r++) {
    peak.push(await mm.run());
    const s0 = performance.now();
    await trainer.step(batch);
    stepMs.push(performance.now() - s0);
    log(`train step ${stepMs.at(-1)!.toFixed(0)} ms`);
  }
  await trainer.release();
  const rssTrain = rssGiB();

  const peakGflops = median(peak);
  const fwdGflops = forwardFlops(cfg, FB, FT) / (fwd / 1000) / 1e9;
  const train = median(stepMs);
  const trainGflops = (3 * forwardFlops(trainCfg, TB, TT)) / (train / 1000) / 1e9;
  const mem = memoryEstimate(cfg, { batch: 16, context: 8 + newTokens });
  const result = {
    device: session.device,
    threads,
    parameters: countParams(cfg),
    matmulPeakGflops: peakGflops,
    forward: {
      batch: FB,
      seq: FT,
      tokPerS: (FB * FT) / (fwd / 1000),
      gflops: fwdGflops,
      ofPeak: fwdGflops / peakGflops,
    },
    decode: { batch1TokPerS: decode1, batch16TokPerS: decode16, ratio: decode16 / decode1, newTokens },
    train: {
      layers: trainCfg.num_hidden_layers,
      batch: TB,
      seq: TT,
      parameters: countParams(trainCfg),
      stepMs: train,
      tokPerS: (TB * TT) / (train / 1000),
      gflops: trainGflops,
      ofPeak: trainGflops / peakGflops,
      createMs: trainCreateMs,
    },
    peakRssGiB: { params: rssParams, forward: rssForward, decode: rssDecode, train: rssTrain },
    estimateGiB: { weights: mem.weights / 1024 ** 3, adamw: mem.adamw / 1024 ** 3 },
  };
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  const f = (x: number, d = 1) => x.toFixed(d);
  process.stdout.write(
    `${[
      `Qwen3-0.6B shape, ${result.parameters.toLocaleString()} parameters, device ${result.device}, medians of ${repeats}`,
      `matmul peak (baseline): ${f(peakGflops)} GFLOP/s`,
      `forward B${FB} x T${FT}: ${f(result.forward.tokPerS)} tok/s, ${f(fwdGflops)} GFLOP/s = ${f(100 * result.forward.ofPeak, 0)}% of peak`,
      `decode (${newTokens} new tokens, 8-token prompts): batch 1 ${f(decode1, 2)} tok/s, batch 16 ${f(decode16, 2)} tok/s = ${f(decode16 / decode1, 2)}x`,
      `train step B${TB} x T${TT}, ${trainCfg.num_hidden_layers} of ${cfg.num_hidden_layers} layers (${result.train.parameters.toLocaleString()} parameters): ${f(train / 1000, 2)} s, ${f(result.train.tokPerS)} tok/s, ${f(trainGflops)} GFLOP/s = ${f(100 * result.train.ofPeak, 0)}% of peak`,
      `peak RSS (GiB): params ${f(rssParams, 2)}, +forward ${f(rssForward, 2)}, +decode ${f(rssDecode, 2)}, +train ${f(rssTrain, 2)}`,
    ].join('\n')}\n`,
  );
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
