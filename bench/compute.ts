/**
 * Compute benchmark of the embedded policy, in one process:
 *   1. a single large float32 MatMul (n x n x n): GFLOP/s = the machine's practical peak for ORT;
 *   2. training (4-layer d256 GPT, n_head 4, B16 x T256) with the Trainer: tokens/s, achieved
 *      GFLOP/s and the ratio to the MatMul peak (acceptance: >= 60%);
 *   3. decoding tokens/s at batch 1 and batch 64 and their ratio (acceptance: >= 5x);
 *   4. session creation times.
 * MatMul runs and training steps are interleaved so both see the same load on a shared machine.
 * Figures are medians over repeats.
 *
 *   npm run build && node dist/bench/compute.js [--device cpu|webgpu|cuda|auto] [--threads N]
 *     [--repeats N] [--matmul N] [--vocab V] [--decode-new N] [--concat-cache] [--json]
 * (--concat-cache decodes with model.ts's Concat-grown cache instead of the in-place step graph.)
 *
 * Training FLOPs per step (stated, as the acceptance depends on it):
 *   6 * N_mm * B * T + 12 * L * D * T * (B * T)
 * where N_mm = 12 L D^2 + V D are the parameters that multiply activations (the four linear maps
 * of each block, plus the tied LM head; embedding lookups cost no FLOPs) and the second term is
 * the attention products Q K^T and A V (2 * 2 * T * D per token per layer forward, x3 for
 * forward + backward; the full T x T products are computed, causal masking saves nothing).
 */
import { parseArgs } from 'node:util';
import { countParams, DEFAULT_GPT_CONFIG, type GPTConfig, initParams } from '../src/gpu/config.js';
import { decodeBatch, type GenerateRequest } from '../src/gpu/decoder.js';
import { OrtDecodeBackend, OrtScorer } from '../src/gpu/ort-policy.js';
import { DEVICE_CHOICES, type DeviceChoice, type SessionConfig } from '../src/gpu/session.js';
import { Trainer } from '../src/gpu/trainer.js';
import { matmulProbe, median } from './probe.js';

const { values: flags } = parseArgs({
  options: {
    device: { type: 'string', default: 'cpu' },
    threads: { type: 'string', default: '0' },
    repeats: { type: 'string', default: '5' },
    matmul: { type: 'string', default: '2048' },
    vocab: { type: 'string', default: '512' },
    'decode-new': { type: 'string', default: '64' },
    json: { type: 'boolean', default: false },
    'concat-cache': { type: 'boolean', default: false },
  },
});
const device = flags.device as DeviceChoice;
if (!DEVICE_CHOICES.includes(device)) throw new Error(`--device must be one of ${DEVICE_CHOICES.join('|')}`);
const threads = Number(flags.threads);
const repeats = Math.max(1, Number(flags.repeats));
const N = Number(flags.matmul);
const newTokens = Number(flags['decode-new']);

// The reference model: DEFAULT_GPT_CONFIG is the 4-layer d256 GPT.
const cfg: GPTConfig = { ...DEFAULT_GPT_CONFIG, vocab_size: Number(flags.vocab) };
const B = 16;
const T = 256;
const session: SessionConfig = {
  device,
  intraOpThreads: threads,
  log: (l) => process.stderr.write(`${l}\n`),
};

function trainFlopsPerStep(c: GPTConfig, batch: number, seq: number): number {
  const { n_layer: L, n_embd: D, vocab_size: V } = c;
  const nMatmul = 12 * L * D * D + V * D;
  return 6 * nMatmul * batch * seq + 12 * L * D * seq * (batch * seq);
}

async function main(): Promise<void> {
  const params = initParams(cfg, 1);

  // ---- 1 + 2: MatMul peak and training, interleaved ----
  const mm = await matmulProbe(N, session);
  const tTrain = performance.now();
  const trainer = await Trainer.create(cfg, params, { batch: B, seq: T, session });
  const trainCreateMs = performance.now() - tTrain; // graph build + session
  const ids = BigInt64Array.from({ length: B * T }, (_, i) => BigInt((i * 7919) % cfg.vocab_size));
  const batch = {
    inputIds: ids,
    lossMask: new Float32Array(B * (T - 1)).fill(1),
    oldLogprobs: new Float32Array(B * (T - 1)).fill(-Math.log(cfg.vocab_size)),
    advantages: Float32Array.from({ length: B }, (_, i) => (i % 2 ? 1 : -1)),
  };
  await trainer.step(batch); // warm-up
  const stepMs: number[] = [];
  const peak: number[] = [];
  for (let r = 0; r < repeats; r++) {
    peak.push(await mm.run());
    const t0 = performance.now();
    await trainer.step(batch);
    stepMs.push(performance.now() - t0);
  }
  await trainer.release();
  const flops = trainFlopsPerStep(cfg, B, T);
  const trainMs = median(stepMs);
  const trainGflops = flops / (trainMs / 1000) / 1e9;
  const peakGflops = median(peak);

  // ---- 3: decoding at batch 1 and batch 64 ----
  const tDec = performance.now();
  const backend = await OrtDecodeBackend.create(cfg, params, session, { concatCache: flags['concat-cache'] });
  const decodeCreateMs = performance.now() - tDec;
  const requests = (n: number, rep: number): GenerateRequest[] =>
    Array.from({ length: n }, (_, i) => ({
      prompt: Array.from({ length: 16 }, (_, k) => (i * 31 + k * 7 + rep) % cfg.vocab_size),
      maxNewTokens: newTokens,
      seed: rep * 1000 + i,
    }));
  const decodeRate = async (n: number): Promise<number> => {
    await decodeBatch(backend, requests(n, 999)); // warm-up for this shape
    const rates: number[] = [];
    for (let r = 0; r < Math.max(1, Math.ceil(repeats / 2)); r++) {
      const t0 = performance.now();
      const out = await decodeBatch(backend, requests(n, r));
      const tokens = out.reduce((s, o) => s + o.tokens.length, 0);
      rates.push(tokens / ((performance.now() - t0) / 1000));
    }
    return median(rates);
  };
  const decode1 = await decodeRate(1);
  const decode64 = await decodeRate(64);
  await backend.release();

  const tScore = performance.now();
  const scorer = await OrtScorer.create(cfg, params, session);
  const scoreCreateMs = performance.now() - tScore;
  await scorer.release();

  const result = {
    device: backend.device,
    threads: threads || 'ort-default',
    model: { ...cfg, params: countParams(cfg) },
    matmul: { n: N, gflops: peakGflops },
    train: {
      batch: B,
      seq: T,
      stepMs: trainMs,
      tokensPerS: (B * T) / (trainMs / 1000),
      gflopPerStep: flops / 1e9,
      gflops: trainGflops,
      ratioToMatmul: trainGflops / peakGflops,
    },
    decode: {
      cache: flags['concat-cache'] ? 'concat' : 'in-place',
      newTokens,
      prompt: 16,
      batch1TokensPerS: decode1,
      batch64TokensPerS: decode64,
      ratio: decode64 / decode1,
    },
    sessionCreateMs: {
      matmul: mm.createMs,
      train: trainCreateMs,
      decode: decodeCreateMs,
      score: scoreCreateMs,
    },
    repeats,
  };
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const f = (x: number, d = 1) => x.toFixed(d);
  const lines = [
    `device ${result.device}, intra-op threads ${result.threads}, medians of ${repeats} runs`,
    `MatMul ${N}^3 float32:            ${f(peakGflops)} GFLOP/s (practical peak)`,
    `train 4L d256 B${B}xT${T} V${cfg.vocab_size}:  ${f(trainMs, 0)} ms/step, ${f(result.train.tokensPerS, 0)} tok/s, ${f(trainGflops)} GFLOP/s (${f(flops / 1e9, 2)} GFLOP/step) = ${f(100 * result.train.ratioToMatmul, 0)}% of MatMul peak (acceptance >= 60%)`,
    `decode (${result.decode.cache} cache, prompt 16, ${newTokens} new):  batch 1 ${f(decode1, 0)} tok/s, batch 64 ${f(decode64, 0)} tok/s, ratio ${f(result.decode.ratio, 1)}x (acceptance >= 5x)`,
    `session creation: matmul ${f(mm.createMs, 0)} ms, train ${f(trainCreateMs, 0)} ms (incl. graph build), decode ${f(decodeCreateMs, 0)} ms, score ${f(scoreCreateMs, 0)} ms`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
