/**
 * GPU acceptance check, one stage per process (`scripts/gpu-check.sh` runs the stages, each under
 * its own timeout, samples GPU memory and prints the one summary line):
 *   probe       the first GPU provider that creates a session (exit 2 and the reason if none);
 *   parity      logprobs of the tiny GPT-2, Qwen3, Qwen2 and Llama models (bench/configs/tiny-*)
 *               on the GPU provider equal those on CPU (max |difference| <= --tol, default 1e-3:
 *               GPU matmuls may use TF32-like reduced precision);
 *   half        16-bit weights (src/gpu/model-inputs.ts): the tiny models on the GPU with float16
 *               and bfloat16 weight inputs equal the CPU's float32 graphs on the same rounded weights;
 *   train       a training step (GRPO + AKBE loss, backward, AdamW) of the tiny Qwen3 on both
 *               devices: same loss and same updated logprobs within --tol;
 *   decode      decode throughput of a random Qwen3-0.6B-shaped policy at batch 1 and 16, its
 *               weights fed as --weights-dtype (float16 / bfloat16 halve what is fed);
 *   train-speed training-step throughput of the 0.6B shape (B x T = 4 x 128).
 * Each stage prints ONE line on stdout (`<stage>: <figures>`); progress goes to stderr. Exit 0 =
 * within tolerance, 1 = a check failed, 2 = no GPU provider here (probe; the line says why).
 *
 *   node dist/scripts/gpu-check.js --stage S [--device auto|cuda|webgpu] [--tol 1e-3]
 *     [--weights-dtype float32|float16|bfloat16]
 *
 * `--device cpu` is a dry run of a stage itself (CPU against CPU), for machines without a GPU.
 * Configs are read from ./bench/configs (run from the repository root): the script also runs as
 * one esbuild bundle (scripts/gpu-fetch-loader.sh), where import.meta.url is elsewhere.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { architecture, type PolicyConfig, parsePolicyConfig } from '../src/gpu/architecture.js';
import { DEFAULT_GPT_CONFIG } from '../src/gpu/config.js';
import { Graph, ops } from '../src/gpu/graph/index.js';
import { WEIGHTS_DTYPES, type WeightsDtype } from '../src/gpu/model-inputs.js';
import { PolicyRuntime } from '../src/gpu/policy-runtime.js';
import { bf16ToFloat32, f16ToFloat32, float32ToBf16, float32ToF16 } from '../src/gpu/safetensors.js';
import { createSession, type Device, DeviceUnavailableError } from '../src/gpu/session.js';

const { values: flags } = parseArgs({
  options: {
    device: { type: 'string', default: 'auto' },
    tol: { type: 'string', default: '1e-3' },
    stage: { type: 'string', default: 'probe' },
    'weights-dtype': { type: 'string', default: 'float32' },
  },
});
const scaleWeights = flags['weights-dtype'] as WeightsDtype;
const tol = Number(flags.tol);
const log = (s: string) => process.stderr.write(`gpu-check: ${s}\n`);
const readConfig = (file: string) =>
  parsePolicyConfig(JSON.parse(readFileSync(resolve('bench/configs', file), 'utf8')), file);

/** The first GPU provider that creates a session, or the one-line reason none did. */
async function findGpu(): Promise<{ device: Device } | { why: string }> {
  if (!['auto', 'cuda', 'webgpu', 'cpu'].includes(flags.device))
    return { why: `--device must be auto, cuda, webgpu or cpu (a dry run), got '${flags.device}'` };
  if (!(WEIGHTS_DTYPES as readonly string[]).includes(scaleWeights))
    return { why: `--weights-dtype must be ${WEIGHTS_DTYPES.join(', ')}, got '${scaleWeights}'` };
  const wanted: Device[] = flags.device === 'auto' ? ['cuda', 'webgpu'] : [flags.device as Device];
  const why: string[] = [];
  const g = new Graph({ name: 'probe' });
  g.output(ops.add(g.input('x', 'float32', [1]), 1), 'y');
  for (const device of wanted) {
    try {
      const { session } = await createSession(g.serialize(), { device });
      await session.release();
      return { device };
    } catch (e) {
      why.push(`${device}: ${e instanceof DeviceUnavailableError ? e.reason : (e as Error).message}`);
    }
  }
  return { why: `no GPU provider available (${why.join('; ')})` };
}

/** Weights with std 0.5 (norm weights 1) so the tiny models' distributions are far from flat. */
function wideParams(cfg: PolicyConfig, seed: number) {
  const p = architecture(cfg).initParams(seed);
  for (const [name, v] of p)
    if (!/(norm|ln_\w+)\.weight$/.test(name)) for (let i = 0; i < v.length; i++) v[i] *= 25;
  return p;
}

const maxDiff = (a: number[][], b: number[][]) =>
  Math.max(...a.flatMap((row, i) => row.map((x, k) => Math.abs(x - b[i][k]))));

async function parity(device: Device): Promise<{ worst: number; models: number }> {
  const tiny: Array<[string, PolicyConfig]> = [
    ['gpt2', { ...DEFAULT_GPT_CONFIG, vocab_size: 19, n_embd: 16, n_layer: 2, n_head: 2, n_positions: 32 }],
    ...['qwen3', 'qwen2', 'llama'].map((f): [string, PolicyConfig] => [f, readConfig(`tiny-${f}.json`)]),
  ];
  const seqs = [
    [1, 5, 7, 2, 9, 12, 3, 17, 4],
    [4, 11, 6],
  ];
  let worst = 0;
  for (const [name, cfg] of tiny) {
    const params = wideParams(cfg, 1);
    await using cpu = await PolicyRuntime.create(cfg, params, { device: 'cpu' });
    await using gpu = await PolicyRuntime.create(cfg, params, { device });
    const d = maxDiff(await cpu.logprobs(seqs), await gpu.logprobs(seqs));
    log(`${name}: max |logprob cpu - ${device}| = ${d.toExponential(2)}`);
    worst = Math.max(worst, d);
  }
  return { worst, models: tiny.length };
}

/** The tiny models with 16-bit weight inputs on the GPU against float32 on CPU, same rounded weights. */
async function halfParity(device: Device): Promise<{ worst: number; runs: number }> {
  const seqs = [
    [1, 5, 7, 2, 9, 12, 3, 17, 4],
    [4, 11, 6],
  ];
  let worst = 0;
  let runs = 0;
  for (const f of ['qwen3', 'qwen2', 'llama']) {
    const cfg = readConfig(`tiny-${f}.json`);
    for (const weights of ['float16', 'bfloat16'] as const) {
      const round =
        weights === 'float16'
          ? (w: Float32Array) => f16ToFloat32(float32ToF16(w))
          : (w: Float32Array) => bf16ToFloat32(float32ToBf16(w));
      const params = new Map([...wideParams(cfg, 3)].map(([k, w]) => [k, round(w)]));
      await using cpu = await PolicyRuntime.create(cfg, params, { device: 'cpu' });
      await using gpu = await PolicyRuntime.create(cfg, params, { device, weights });
      const d = maxDiff(await cpu.logprobs(seqs), await gpu.logprobs(seqs));
      log(
        `${f} ${weights} weights: max |logprob cpu float32 - ${device} ${weights}| = ${d.toExponential(2)}`,
      );
      worst = Math.max(worst, d);
      runs++;
    }
  }
  return { worst, runs };
}

async function trainStep(device: Device): Promise<{ lossDiff: number; afterDiff: number }> {
  const cfg = readConfig('tiny-qwen3.json');
  const params = wideParams(cfg, 2);
  const [B, T] = [2, 8];
  const batch = {
    inputIds: Array.from({ length: B * T }, (_, i) => (i * 7) % 19),
    lossMask: new Array(B * (T - 1)).fill(1),
    oldLogprobs: new Array(B * (T - 1)).fill(-Math.log(19)),
    advantages: [1, -1],
  };
  const seqs = [batch.inputIds.slice(0, T)];
  const run = async (dev: Device) => {
    await using rt = await PolicyRuntime.create(cfg, params, {
      device: dev,
      trainer: { hyper: { lr: 1e-3 } },
    });
    const m = await rt.trainStep({ batch });
    return { loss: m.loss, after: await rt.logprobs(seqs) };
  };
  const c = await run('cpu');
  const g = await run(device);
  log(`train step: loss cpu ${c.loss.toFixed(6)}, ${device} ${g.loss.toFixed(6)}`);
  return { lossDiff: Math.abs(c.loss - g.loss), afterDiff: maxDiff(c.after, g.after) };
}

async function decodeScale(device: Device): Promise<{ b1: number; b16: number }> {
  const cfg = readConfig('qwen3-0.6b.json');
  await using rt = await PolicyRuntime.create(cfg, architecture(cfg).initParams(0), {
    device,
    maxBatch: 16,
    weights: scaleWeights,
  });
  const rate = async (batch: number) => {
    const reqs = Array.from({ length: batch }, (_, i) => ({
      prompt: [1 + i, 2, 3, 4],
      maxNewTokens: 32,
      seed: i,
    }));
    await rt.generateBatch(reqs.slice(0, 1)); // warm-up
    const t0 = performance.now();
    const out = await rt.generateBatch(reqs);
    return out.reduce((n, o) => n + o.tokens.length, 0) / ((performance.now() - t0) / 1000);
  };
  return { b1: await rate(1), b16: await rate(16) };
}

/** 0.6B-shaped training steps on the device: tokens per second over 3 steps after a warm-up. */
async function trainSpeed(device: Device): Promise<{ tokPerSec: number; stepSec: number }> {
  const cfg = readConfig('qwen3-0.6b.json');
  const [B, T] = [4, 128];
  const V = cfg.vocab_size;
  const batch = {
    inputIds: Array.from({ length: B * T }, (_, i) => (i * 7919) % V),
    lossMask: new Array(B * (T - 1)).fill(1),
    oldLogprobs: new Array(B * (T - 1)).fill(-Math.log(V)),
    advantages: Array.from({ length: B }, (_, b) => (b % 2 ? 1 : -1)),
  };
  await using rt = await PolicyRuntime.create(cfg, architecture(cfg).initParams(0), {
    device,
    trainer: { hyper: { lr: 1e-5 } },
  });
  await rt.trainStep({ batch }); // warm-up (session creation)
  const t0 = performance.now();
  for (let i = 0; i < 3; i++) await rt.trainStep({ batch });
  const stepSec = (performance.now() - t0) / 3000;
  return { tokPerSec: (B * T) / stepSec, stepSec };
}

const e1 = (x: number) => x.toExponential(1);

/** Runs one stage; returns its line and whether it passed. */
async function stage(name: string, dev: Device): Promise<[string, boolean]> {
  switch (name) {
    case 'parity': {
      const p = await parity(dev);
      return [`max|dlogprob|=${e1(p.worst)} over ${p.models} tiny models`, p.worst <= tol];
    }
    case 'half': {
      const h = await halfParity(dev);
      return [`16-bit weights max|dlogprob|=${e1(h.worst)} over ${h.runs} runs`, h.worst <= tol];
    }
    case 'train': {
      const tr = await trainStep(dev);
      const ok = tr.lossDiff <= tol && tr.afterDiff <= tol;
      return [`tiny step |dloss|=${e1(tr.lossDiff)} |dlogprob after|=${e1(tr.afterDiff)}`, ok];
    }
    case 'decode': {
      const s = await decodeScale(dev);
      return [`0.6B ${scaleWeights} ${s.b1.toFixed(1)} tok/s at batch 1, ${s.b16.toFixed(1)} at 16`, true];
    }
    case 'train-speed': {
      const s = await trainSpeed(dev);
      return [`0.6B 4x128 ${s.tokPerSec.toFixed(0)} tok/s (${s.stepSec.toFixed(2)} s/step)`, true];
    }
    default:
      throw new Error(`--stage must be probe, parity, half, train, decode or train-speed, got '${name}'`);
  }
}

async function main(): Promise<number> {
  const found = await findGpu();
  if ('why' in found) {
    process.stdout.write(`SKIP: ${found.why}\n`);
    return 2;
  }
  if (flags.stage === 'probe') {
    process.stdout.write(`probe: ${found.device}\n`);
    return 0;
  }
  const [line, ok] = await stage(flags.stage, found.device);
  process.stdout.write(`${flags.stage}: ${line}${ok ? '' : ` FAIL (tolerance ${tol})`}\n`);
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stdout.write(`${flags.stage}: FAIL ${(e as Error).message.split('\n')[0]}\n`);
    process.exit(1);
  },
);
