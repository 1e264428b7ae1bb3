/**
 * Peak resident memory of training steps (issue 25 item 1): the Trainer with optimizer 'graph'
 * (AdamW in the train graph: parameters and moments in, updated copies out) against 'host' (the
 * graph returns gradients into buffers allocated once; src/gpu/adamw.ts updates in place), and
 * 'host' with the lm head in chunks of positions (src/gpu/lm-head.ts, TrainerOptions.logitsChunk),
 * each setting in its own child process (maxRSS only grows), on the issue's Qwen3-shaped policy by default:
 * hidden 512, 8 layers, 8 query / 4 KV heads of 64, MLP 1536, vocab 151,936, tied (103M
 * parameters). Where `python3 -c 'import torch'` works, a PyTorch twin (same shape, batch and
 * AdamW, float32, CPU) runs too and the ratios are printed; otherwise akbe's figures alone.
 *
 *   npm run build && node dist/bench/train-memory.js [--batch 4] [--seq 64] [--steps 2]
 *     [--layers 8] [--hidden 512] [--vocab 151936] [--threads 2] [--json]
 *     [--chunks arena,none,default,64] [--optimizers graph,host]
 *
 * `--chunks`: the settings run with optimizer 'host': `arena` (the unchunked head with ORT's CPU
 * arena on: the Trainer before this bench's last change, the baseline of the ratios), `none` (the
 * unchunked head, arena off, the default), `default` (the Trainer's default chunk size) or a number
 * of positions per chunk. `--optimizers graph` adds the in-graph AdamW (unchunked, arena on).
 *
 * Figures per child: RSS after the trainer's creation (parameters, moments, session), peak RSS
 * over --steps steps, seconds per step (median), all with the parameters' float32 bytes beside
 * them so "bytes per parameter" reads off directly.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { architecture, countParams, parsePolicyConfig } from '../src/gpu/architecture.js';
import type { LlamaConfig } from '../src/gpu/llama-config.js';
import { logitsChunkRows } from '../src/gpu/lm-head.js';
import { Trainer } from '../src/gpu/trainer.js';
import { PYTHON, torchMissing } from './torch-twin.js';

const { values: flags } = parseArgs({
  options: {
    batch: { type: 'string', default: '4' },
    seq: { type: 'string', default: '64' },
    steps: { type: 'string', default: '2' },
    layers: { type: 'string', default: '8' },
    hidden: { type: 'string', default: '512' },
    vocab: { type: 'string', default: '151936' },
    threads: { type: 'string', default: '2' },
    chunks: { type: 'string', default: 'arena,none,default' },
    optimizers: { type: 'string', default: 'host' },
    child: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const [B, T, steps, threads] = [flags.batch, flags.seq, flags.steps, flags.threads].map(Number);
const hidden = Number(flags.hidden);
// From the repository root (as dist/bench/ and the TS sources both run from there).
const base = JSON.parse(readFileSync(resolve('bench/configs/qwen3-0.6b.json'), 'utf8')) as Record<
  string,
  unknown
>;
const cfg = parsePolicyConfig({
  ...base,
  hidden_size: hidden,
  num_hidden_layers: Number(flags.layers),
  num_attention_heads: 8,
  num_key_value_heads: 4,
  head_dim: hidden / 8,
  intermediate_size: 3 * hidden,
  vocab_size: Number(flags.vocab),
}) as LlamaConfig;
const V = cfg.vocab_size;
const rssMiB = () => process.resourceUsage().maxRSS / 1024; // maxRSS is in KiB
const log = (s: string) => process.stderr.write(`${s}\n`);

interface Figures {
  createdMiB: number;
  peakMiB: number;
  stepSec: number;
}

/** One child's setting: the optimizer and the head's chunk ('none', 'default' or positions). */
interface Setting {
  optimizer: 'host' | 'graph';
  chunk: string;
}
const chunkOption = (chunk: string): number | undefined =>
  chunk === 'default' ? undefined : chunk === 'none' || chunk === 'arena' ? B * (T - 1) : Number(chunk);

async function child({ optimizer, chunk }: Setting): Promise<Figures> {
  const params = architecture(cfg).initParams(0);
  const trainer = await Trainer.create(cfg, params, {
    batch: B,
    seq: T,
    optimizer,
    logitsChunk: chunkOption(chunk),
    cpuArena: optimizer === 'graph' || chunk === 'arena',
    session: { intraOpThreads: threads },
  });
  params.clear(); // the trainer holds its own copy; a runtime keeps one more (not counted here)
  const createdMiB = rssMiB();
  const batch = {
    inputIds: Array.from({ length: B * T }, (_, i) => (i * 7919) % V),
    lossMask: new Array(B * (T - 1)).fill(1),
    oldLogprobs: new Array(B * (T - 1)).fill(-Math.log(V)),
    advantages: Array.from({ length: B }, (_, b) => (b % 2 ? 1 : -1)),
  };
  const secs: number[] = [];
  for (let i = 0; i < steps; i++) secs.push((await trainer.step(batch)).ms / 1000);
  await trainer.release();
  return { createdMiB, peakMiB: rssMiB(), stepSec: [...secs].sort((a, b) => a - b)[secs.length >> 1] };
}

/** The PyTorch twin (run only where torch imports): the same shape, batch and AdamW in float32. */
const TORCH_TWIN = `
import sys, time, resource, torch, torch.nn as nn, torch.nn.functional as F
H, L, V, B, T, steps, threads = map(int, sys.argv[1:8])
torch.set_num_threads(threads); torch.manual_seed(0)
nh, nkv, hd, I = 8, 4, H // 8, 3 * H
# Debian's torch 1.13 has neither nn.RMSNorm (2.4) nor F.scaled_dot_product_attention (2.0).
class _RMSNorm(nn.Module):
    def __init__(s, n, eps):
        super().__init__(); s.weight, s.eps = nn.Parameter(torch.ones(n)), eps
    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.weight
RMSNorm = getattr(nn, 'RMSNorm', _RMSNorm)
def _sdpa(q, k, v, is_causal=True):
    a = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
    a = a.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf'))
    return a.softmax(-1) @ v
sdpa = getattr(F, 'scaled_dot_product_attention', _sdpa)
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = RMSNorm(H, eps=1e-6), RMSNorm(H, eps=1e-6)
        s.q, s.k, s.v = nn.Linear(H, nh*hd, bias=False), nn.Linear(H, nkv*hd, bias=False), nn.Linear(H, nkv*hd, bias=False)
        s.qn, s.kn = RMSNorm(hd, eps=1e-6), RMSNorm(hd, eps=1e-6)
        s.o = nn.Linear(nh*hd, H, bias=False)
        s.g, s.u, s.d = nn.Linear(H, I, bias=False), nn.Linear(H, I, bias=False), nn.Linear(I, H, bias=False)
    def forward(s, x):
        h = s.n1(x)
        q = s.qn(s.q(h).view(B, T, nh, hd)).transpose(1, 2)
        k = s.kn(s.k(h).view(B, T, nkv, hd)).transpose(1, 2).repeat_interleave(nh // nkv, 1)
        v = s.v(h).view(B, T, nkv, hd).transpose(1, 2).repeat_interleave(nh // nkv, 1)
        x = x + s.o(sdpa(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H))
        h = s.n2(x)
        return x + s.d(F.silu(s.g(h)) * s.u(h))
class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.blocks, s.norm = nn.Embedding(V, H), nn.ModuleList(Block() for _ in range(L)), RMSNorm(H, eps=1e-6)
    def forward(s, ids):
        x = s.emb(ids)
        for b in s.blocks: x = b(x)
        return s.norm(x) @ s.emb.weight.T
m = Model()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
ids = (torch.arange(B * T) * 7919 % V).view(B, T)
created = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
secs = []
for _ in range(steps):
    t0 = time.perf_counter()
    logp = F.log_softmax(m(ids)[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    loss = -(logp * torch.tensor([1.0 if b % 2 else -1.0 for b in range(B)])[:, None]).mean()
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    secs.append(time.perf_counter() - t0)
print('{"createdMiB": %.1f, "peakMiB": %.1f, "stepSec": %.3f}' % (created, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, sorted(secs)[len(secs) // 2]))
`;

function runChild(s: Setting): Figures {
  const tag = `${s.optimizer}:${s.chunk}`;
  const args = [...process.execArgv, process.argv[1], ...process.argv.slice(2), '--child', tag];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`child ${tag} exited ${r.status}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Figures;
}

function runTorch(): Figures | string {
  const missing = torchMissing();
  if (missing) return missing;
  const out = execFileSync(
    PYTHON,
    ['-c', TORCH_TWIN, ...[hidden, cfg.num_hidden_layers, V, B, T, steps, threads].map(String)],
    { encoding: 'utf8' },
  );
  return JSON.parse(out.trim().split('\n').pop()!) as Figures;
}

const nameOf = (s: Setting) =>
  s.optimizer === 'graph'
    ? "'graph', arena"
    : s.chunk === 'arena'
      ? "'host', arena"
      : s.chunk === 'none'
        ? "'host', unchunked"
        : `'host' chunk ${s.chunk === 'default' ? `default (${logitsChunkRows(V, 4)})` : s.chunk}`;

if (flags.child) {
  const [optimizer, chunk] = flags.child.split(':') as [Setting['optimizer'], string];
  process.stdout.write(`${JSON.stringify(await child({ optimizer, chunk }))}\n`);
} else {
  const n = countParams(cfg);
  const paramMiB = (n * 4) / 2 ** 20;
  log(
    `train-memory: ${n} parameters (${paramMiB.toFixed(0)} MiB float32), B x T = ${B} x ${T}, ${threads} threads`,
  );
  const settings: Setting[] = [
    ...(flags.optimizers.split(',').includes('graph')
      ? [{ optimizer: 'graph' as const, chunk: 'none' }]
      : []),
    ...flags.chunks.split(',').map((chunk) => ({ optimizer: 'host' as const, chunk })),
  ];
  const results = settings.map((s) => ({ setting: s, name: nameOf(s), figures: runChild(s) }));
  const base = results.find((r) => r.setting.optimizer === 'host' && r.setting.chunk === 'arena');
  const torch = runTorch();
  const row = (name: string, f: Figures) =>
    `${name.padEnd(24)} created ${(f.createdMiB / 1024).toFixed(2)} GiB, peak ${(f.peakMiB / 1024).toFixed(2)} GiB ` +
    `(${((f.peakMiB * 2 ** 20) / n).toFixed(1)} B/param), ${f.stepSec.toFixed(2)} s/step` +
    (base ? `, peak / 'host', arena ${(f.peakMiB / base.figures.peakMiB).toFixed(3)}` : '');
  if (flags.json) console.log(JSON.stringify({ params: n, batch: B, seq: T, threads, results, torch }));
  else {
    for (const r of results) console.log(row(r.name, r.figures));
    if (typeof torch === 'string') console.log(torch);
    else {
      console.log(row('PyTorch', torch));
      for (const r of results)
        console.log(`${r.name} / PyTorch peak: ${(r.figures.peakMiB / torch.peakMiB).toFixed(3)}`);
    }
  }
}
