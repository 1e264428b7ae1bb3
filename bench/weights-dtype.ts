/**
 * What 16-bit weight inputs (src/gpu/model-inputs.ts `WeightsDtype`) cost and save on this
 * machine's provider, in one process, against the float32 graphs as the baseline: a random
 * Qwen3-0.6B-shaped policy cut to --layers layers (the 151,936 x 1024 embedding, tied, is most of
 * its weights), for each of float32 / float16 / bfloat16:
 *   - scoring tokens/s at B x T = 2 x 64 and decode tokens/s at batch 4 (8-token prompts,
 *     --decode-new tokens), medians of --repeats, and their ratio to float32;
 *   - the bytes fed as weights, and the resident memory the runtime adds, measured in a child
 *     process per dtype (RSS after its first scoring and decoding minus RSS before it was created;
 *     the float32 parameter arrays, which the runtime keeps for training and saving, are
 *     allocated before and not counted).
 *
 *   npm run build && node dist/bench/weights-dtype.js [--device cpu|cuda|webgpu] [--layers 4]
 *     [--threads N] [--repeats 3] [--decode-new 16]
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { architecture, countParams, parsePolicyConfig } from '../src/gpu/architecture.js';
import type { LlamaConfig } from '../src/gpu/llama-config.js';
import { formatBytes } from '../src/gpu/memory.js';
import { WEIGHTS_DTYPES } from '../src/gpu/model-inputs.js';
import { PolicyRuntime } from '../src/gpu/policy-runtime.js';
import type { DeviceChoice } from '../src/gpu/session.js';
import { median } from './probe.js';

const { values: flags } = parseArgs({
  options: {
    device: { type: 'string', default: 'cpu' },
    layers: { type: 'string', default: '4' },
    threads: { type: 'string', default: '0' },
    repeats: { type: 'string', default: '3' },
    'decode-new': { type: 'string', default: '16' },
    'memory-of': { type: 'string' },
  },
});
const base = parsePolicyConfig(
  JSON.parse(readFileSync(new URL('../../bench/configs/qwen3-0.6b.json', import.meta.url), 'utf8')),
) as LlamaConfig;
const cfg: LlamaConfig = { ...base, num_hidden_layers: Number(flags.layers) };
const params = architecture(cfg).initParams(0);
const repeats = Math.max(1, Number(flags.repeats));
const log = (s: string) => process.stderr.write(`${s}\n`);
const rss = () => process.memoryUsage().rss;
const [B, T] = [2, 64];
const seqs = Array.from({ length: B }, (_, b) =>
  Array.from({ length: T }, (_, t) => (b * 31 + t * 7) % 1000),
);
const reqs = Array.from({ length: 4 }, (_, i) => ({
  prompt: [1 + i, 2, 3, 4, 5, 6, 7, 8],
  maxNewTokens: Number(flags['decode-new']),
  seed: i,
  stopTokens: [],
}));

const start = (weights: (typeof WEIGHTS_DTYPES)[number]) =>
  PolicyRuntime.create(cfg, params, {
    device: flags.device as DeviceChoice,
    intraOpThreads: Number(flags.threads),
    weights,
  });

if (flags['memory-of']) {
  // The child: one runtime, its first scoring and decoding, the RSS it added.
  const before = rss();
  const rt = await start(flags['memory-of'] as (typeof WEIGHTS_DTYPES)[number]);
  await rt.logprobs(seqs);
  await rt.generateBatch(reqs.slice(0, 1));
  process.stdout.write(`${rss() - before}\n`);
  await rt.close();
  process.exit(0);
}

const memoryOf = (weights: string) =>
  Number(
    execFileSync(process.execPath, [process.argv[1], ...process.argv.slice(2), '--memory-of', weights], {
      encoding: 'utf8',
    }).trim(),
  );

const rows: Array<{ weights: string; score: number; decode: number; fed: number; added: number }> = [];
for (const weights of WEIGHTS_DTYPES) {
  const rt = await start(weights);
  await rt.logprobs(seqs); // warm-up
  await rt.generateBatch(reqs.slice(0, 1));
  const score: number[] = [];
  const decode: number[] = [];
  for (let r = 0; r < repeats; r++) {
    let t0 = performance.now();
    await rt.logprobs(seqs);
    score.push((B * T) / ((performance.now() - t0) / 1000));
    t0 = performance.now();
    const out = await rt.generateBatch(reqs);
    decode.push(out.reduce((n, o) => n + o.tokens.length, 0) / ((performance.now() - t0) / 1000));
  }
  await rt.close();
  const fed = countParams(cfg) * (weights === 'float32' ? 4 : 2);
  rows.push({ weights, score: median(score), decode: median(decode), fed, added: memoryOf(weights) });
  log(`${weights}: done`);
}
const f32 = rows[0];
process.stdout.write(
  `Qwen3-0.6B shape cut to ${cfg.num_hidden_layers} layers (${countParams(cfg)} parameters), ${flags.device}, ${repeats} repeats\n`,
);
for (const r of rows)
  process.stdout.write(
    `${r.weights.padEnd(9)} score ${r.score.toFixed(1)} tok/s (x${(r.score / f32.score).toFixed(2)}), decode ${r.decode.toFixed(1)} tok/s (x${(r.decode / f32.decode).toFixed(2)}), weights fed ${formatBytes(r.fed)}, runtime added ${formatBytes(Math.max(0, r.added))} RSS\n`,
  );
