/**
 * akbe against PyTorch, side by side (issue 25 item 2): a training step (forward + backward +
 * AdamW), scoring (forward logprobs of given tokens) and greedy decoding with a KV cache at batch
 * 1 / 16 / 64, each at 1 and 2 threads (ORT intra-op threads, spinning off as in every session;
 * torch.set_num_threads and OMP_NUM_THREADS), on the GPT-2 world policy shapes: `base` (the
 * committed assets/base: d64, 2 layers, vocab 604, context 128) and `d256` (4 layers, d256, the
 * same vocabulary and context, seeded weights). The twin (bench/torch-speed-twin.py) is the same
 * model read from the same model.safetensors, so the logits are cross-checked (printed: max
 * |logprob diff| over the scoring batch, max |logit diff| at the prompts' last position, and
 * whether greedy decoding picks the same tokens). Without torch (bench/torch-twin.ts) akbe's
 * figures print alone.
 *
 *   npm run build && node dist/bench/torch-speed.js [--shapes base,d256] [--threads 1,2]
 *     [--repeats 3] [--batches 1,16,64] [--new 32] [--prompt 16] [--train-batch 16]
 *     [--score-batch 32] [--seq 128] [--json]
 *
 * Times are medians over --repeats after one warm-up; ratios are torch time / akbe time (> 1:
 * akbe faster; for decode, akbe tok/s over torch tok/s). The two sides do the same work: torch's
 * loss is the plain policy gradient -(logp * A).mean() with clip_grad_norm_ and AdamW, akbe's
 * Trainer the PPO-style loss of its defaults (a few more elementwise ops on [B, T-1]); both
 * decoders compute each token's log-softmax beside the argmax. Also printed: the machine's copy
 * bandwidth (one 256 MiB Float32Array copy, median of 3) and the weight-streaming bound on decode
 * at batch 1 (float32 weight bytes read once per token over that bandwidth).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { architecture, countParams, type PolicyConfig } from '../src/gpu/architecture.js';
import { loadCheckpoint, MODEL_FILE, saveCheckpoint } from '../src/gpu/checkpoint.js';
import type { Params } from '../src/gpu/config.js';
import { decodeBatch, type GenerateRequest } from '../src/gpu/decoder.js';
import { OrtDecodeBackend, OrtScorer } from '../src/gpu/ort-policy.js';
import type { SessionConfig } from '../src/gpu/session.js';
import { Trainer } from '../src/gpu/trainer.js';
import { median } from './probe.js';
import { PYTHON, torchMissing } from './torch-twin.js';

const { values: flags } = parseArgs({
  options: {
    shapes: { type: 'string', default: 'base' },
    threads: { type: 'string', default: '1,2' },
    repeats: { type: 'string', default: '3' },
    batches: { type: 'string', default: '1,16,64' },
    new: { type: 'string', default: '32' },
    prompt: { type: 'string', default: '16' },
    'train-batch': { type: 'string', default: '16' },
    'score-batch': { type: 'string', default: '32' },
    seq: { type: 'string', default: '128' },
    json: { type: 'boolean', default: false },
  },
});
const list = (s: string) => s.split(',').map(Number);
const repeats = Math.max(1, Number(flags.repeats));
const batches = list(flags.batches);
const newTokens = Number(flags.new);
const log = (s: string) => process.stderr.write(`${s}\n`);

interface Shape {
  name: string;
  cfg: PolicyConfig;
  params: Params;
  /** The model.safetensors both sides load. */
  weights: string;
}

const scratch = mkdtempSync(join(tmpdir(), 'akbe-torch-speed-'));

async function loadShape(name: string): Promise<Shape> {
  const base = await loadCheckpoint('assets/base');
  if (name === 'base')
    return { name, cfg: base.config, params: base.params, weights: 'assets/base/model.safetensors' };
  if (name !== 'd256') throw new Error(`--shapes: unknown shape ${name} (base, d256)`);
  const cfg = { ...base.config, n_embd: 256, n_layer: 4, n_head: 4 } as PolicyConfig;
  const params = architecture(cfg).initParams(1);
  const dir = join(scratch, name);
  await saveCheckpoint(dir, { config: cfg, params });
  return { name, cfg, params, weights: join(dir, MODEL_FILE) };
}

/** The token ids both sides run: deterministic, spread over the vocabulary. */
function workload(V: number) {
  const T = Number(flags.seq);
  const rows = (n: number, len: number, salt: number) =>
    Array.from({ length: n }, (_, b) =>
      Array.from({ length: len }, (_, t) => (b * 131 + t * 7919 + salt) % V),
    );
  const prompts = rows(Math.max(...batches), Number(flags.prompt), 3);
  return {
    train: rows(Number(flags['train-batch']), T, 1),
    score: rows(Number(flags['score-batch']), T, 2),
    prompts,
    check: prompts.slice(0, 16),
  };
}
type Work = ReturnType<typeof workload>;

interface Figures {
  trainS: number;
  scoreS: number;
  /** Seconds per decodeBatch of `new` tokens, by batch size. */
  decodeS: Record<string, number>;
  scoreLogprobs: number[];
  /** Logits at each check prompt's last position, [rows, V] flat. */
  checkLogits: number[];
  /** Greedy tokens of the check prompts. */
  checkTokens: number[][];
}

/** Median seconds of `fn` over the repeats, after one warm-up run. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  await fn();
  const secs: number[] = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    await fn();
    secs.push((performance.now() - t0) / 1000);
  }
  return median(secs);
}

const greedy = (prompts: number[][]): GenerateRequest[] =>
  prompts.map((prompt, i) => ({ prompt, maxNewTokens: newTokens, seed: i, temperature: 0 }));

async function akbeDecode(s: Shape, work: Work, session: SessionConfig) {
  const backend = await OrtDecodeBackend.create(s.cfg, s.params, session);
  const slots = work.check.map((p) => p.length + newTokens);
  const checkLogits = Array.from(await backend.open().prefill(work.check, slots));
  const checkTokens = (await decodeBatch(backend, greedy(work.check))).map((r) => r.tokens);
  const decodeS: Record<string, number> = {};
  for (const b of batches)
    decodeS[b] = await timed(() => decodeBatch(backend, greedy(work.prompts.slice(0, b))));
  await backend.release();
  return { checkLogits, checkTokens, decodeS };
}

/** akbe's figures: scoring and decoding first, training last (its steps move the weights). */
async function akbe(s: Shape, work: Work, threads: number): Promise<Figures> {
  const session: SessionConfig = { device: 'cpu', intraOpThreads: threads };
  const scorer = await OrtScorer.create(s.cfg, s.params, session);
  const scoreS = await timed(() => scorer.logprobs(work.score));
  const scoreLogprobs = (await scorer.logprobs(work.score)).flat();
  await scorer.release();
  const decode = await akbeDecode(s, work, session);
  const [B, T] = [work.train.length, work.train[0].length];
  const trainer = await Trainer.create(s.cfg, s.params, { batch: B, seq: T, session });
  const batch = {
    inputIds: work.train.flat(),
    lossMask: new Array(B * (T - 1)).fill(1),
    oldLogprobs: new Array(B * (T - 1)).fill(-Math.log(architecture(s.cfg).vocabSize)),
    advantages: Array.from({ length: B }, (_, b) => (b % 2 ? 1 : -1)),
  };
  const trainS = await timed(() => trainer.step(batch));
  await trainer.release();
  return { trainS, scoreS, scoreLogprobs, ...decode };
}

function torch(s: Shape, work: Work, threads: number): Figures {
  const g = s.cfg as unknown as Record<string, number>;
  const spec = {
    threads,
    weights: s.weights,
    n_embd: g.n_embd,
    n_layer: g.n_layer,
    n_head: g.n_head,
    vocab: g.vocab_size,
    eps: g.layer_norm_epsilon,
    repeats,
    new: newTokens,
    batches,
    train_ids: work.train,
    score_ids: work.score,
    prompts: work.prompts,
    check_prompts: work.check,
  };
  const out = execFileSync(PYTHON, ['bench/torch-speed-twin.py'], {
    input: JSON.stringify(spec),
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    // PASSIVE: OpenMP workers sleep when idle, as ORT's do with spinning off (an active wait on
    // a loaded 2-core machine starves the other thread: 40x slower decoding at 2 threads).
    env: { ...process.env, OMP_NUM_THREADS: String(threads), OMP_WAIT_POLICY: 'PASSIVE' },
  });
  const r = JSON.parse(out.trim().split('\n').pop()!);
  return {
    trainS: r.train_s,
    scoreS: r.score_s,
    decodeS: r.decode_s,
    scoreLogprobs: r.score_logprobs,
    checkLogits: r.check_logits,
    checkTokens: r.check_tokens,
  };
}

/** GB/s of one large Float32Array copy (bytes read + written), median of 3. */
function copyBandwidth(): number {
  const n = 64 * 2 ** 20; // 256 MiB
  const src = new Float32Array(n).fill(1);
  const dst = new Float32Array(n);
  dst.set(src); // fault the pages in
  const rates = [0, 1, 2].map(() => {
    const t0 = performance.now();
    dst.set(src);
    return (2 * 4 * n) / ((performance.now() - t0) / 1000) / 1e9;
  });
  return median(rates);
}

const maxDiff = (a: number[], b: number[]) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

/** The table rows of one shape at one thread count: [what, akbe, torch, torch/akbe]. */
function rows(work: Work, a: Figures, t?: Figures): string[][] {
  const f = (x: number, d = 3) => x.toFixed(d);
  const [TB, TT] = [work.train.length, work.train[0].length];
  const out = [
    [`train step ${TB}x${TT} (s)`, f(a.trainS), t ? f(t.trainS) : '-', t ? f(t.trainS / a.trainS, 2) : '-'],
    [
      `score ${work.score.length}x${work.score[0].length} (s)`,
      f(a.scoreS, 4),
      t ? f(t.scoreS, 4) : '-',
      t ? f(t.scoreS / a.scoreS, 2) : '-',
    ],
  ];
  for (const b of batches) {
    const rate = (sec: number) => f((b * newTokens) / sec, 0);
    const ratio = t ? f(t.decodeS[b] / a.decodeS[b], 2) : '-';
    out.push([`decode batch ${b} (tok/s)`, rate(a.decodeS[b]), t ? rate(t.decodeS[b]) : '-', ratio]);
  }
  return out;
}

function sanity(a: Figures, t: Figures): string {
  const same = a.checkTokens.filter((r, i) => JSON.stringify(r) === JSON.stringify(t.checkTokens[i])).length;
  return (
    `max |logprob diff| ${maxDiff(a.scoreLogprobs, t.scoreLogprobs).toExponential(1)} (scoring batch), ` +
    `max |logit diff| ${maxDiff(a.checkLogits, t.checkLogits).toExponential(1)} (${a.checkTokens.length} prompts' last position), ` +
    `greedy tokens equal in ${same}/${a.checkTokens.length} rows`
  );
}

async function main(): Promise<void> {
  const missing = torchMissing();
  if (missing) log(`${missing}: akbe's figures alone`);
  const load0 = loadavg()[0];
  const bw = copyBandwidth();
  const results: unknown[] = [];
  for (const name of flags.shapes.split(',')) {
    const s = await loadShape(name);
    const work = workload(architecture(s.cfg).vocabSize);
    const weightBytes = countParams(s.cfg) * 4;
    for (const threads of list(flags.threads)) {
      const a = await akbe(s, work, threads);
      const t = missing ? undefined : torch(s, work, threads);
      results.push({
        shape: name,
        threads,
        akbe: { ...a, checkLogits: undefined },
        torch: t && { ...t, checkLogits: undefined },
      });
      if (flags.json) continue;
      console.log(
        `\n${name} (${countParams(s.cfg)} parameters), ${threads} thread(s), medians of ${repeats}`,
      );
      console.log('| setting | akbe | torch | torch/akbe |\n| --- | --- | --- | --- |');
      for (const r of rows(work, a, t)) console.log(`| ${r.join(' | ')} |`);
      if (t) console.log(sanity(a, t));
      const bound = (bw * 1e9) / weightBytes;
      const b1 = newTokens / a.decodeS[1];
      if (batches.includes(1))
        console.log(
          `decode batch 1 against the weight-streaming bound (${(weightBytes / 2 ** 20).toFixed(2)} MiB at ${bw.toFixed(1)} GB/s = ${bound.toFixed(0)} tok/s): ${(bound / b1).toFixed(0)}x below it`,
        );
    }
  }
  if (flags.json) console.log(JSON.stringify({ copyGBs: bw, results }));
  console.log(
    `\nload average ${load0.toFixed(1)} -> ${loadavg()[0].toFixed(1)}; copy bandwidth ${bw.toFixed(1)} GB/s`,
  );
  rmSync(scratch, { recursive: true, force: true });
}

await main();
