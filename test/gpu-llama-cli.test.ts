/**
 * `akbe policy init | info | logprobs | sample` on a Qwen3 config.json: the family's random init
 * saved in BF16 shards, memory figures hand-worked, logprobs and greedy samples equal to the
 * float64 reference forward of the loaded weights.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parsePolicyConfig } from '../src/gpu/architecture.js';
import { loadCheckpoint } from '../src/gpu/checkpoint.js';
import type { LlamaConfig } from '../src/gpu/llama-config.js';
import { runCli } from './helpers/cli.js';
import { refLlamaLogits, refLlamaLogprobs } from './helpers/ref-llama.js';
import { TINY_LLAMA_JSON } from './helpers/tiny-llama.js';

const dir = mkdtempSync(join(tmpdir(), 'akbe-llama-cli-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const ckpt = join(dir, 'qwen3');
const configFile = join(dir, 'config.json');
// A larger init than Qwen's 0.02 so the tiny model's distributions are not flat.
writeFileSync(configFile, JSON.stringify({ ...TINY_LLAMA_JSON.qwen3, initializer_range: 0.5 }));
const cfg = parsePolicyConfig(
  JSON.parse(JSON.stringify({ ...TINY_LLAMA_JSON.qwen3, initializer_range: 0.5 })),
) as LlamaConfig;

t.test(
  'policy init: a Qwen3 config.json becomes a BF16 sharded checkpoint with the family init',
  async (t) => {
    const r = await runCli(
      'policy',
      'init',
      '--config',
      configFile,
      '--out',
      ckpt,
      '--seed',
      '3',
      '--dtype',
      'BF16',
      '--shard-mb',
      '0.001',
    );
    t.equal(r.code, 2, '--shard-mb takes whole megabytes');
    const ok = await runCli(
      'policy',
      'init',
      '--config',
      configFile,
      '--out',
      ckpt,
      '--seed',
      '3',
      '--dtype',
      'BF16',
    );
    t.equal(ok.code, 0, ok.err);
    t.match(ok.out, /\(\d+ parameters, seed 3\): qwen3, BF16/);
    const c = await loadCheckpoint(ckpt);
    t.same(c.config, cfg);
    t.ok(
      c.params.get('model.norm.weight')!.every((v) => v === 1),
      'RMSNorm weights start at 1',
    );
    t.ok(readdirSync(ckpt).includes('model.safetensors'));
    const bad = join(dir, 'bad.json');
    writeFileSync(
      bad,
      JSON.stringify({ ...TINY_LLAMA_JSON.qwen3, rope_scaling: { rope_type: 'yarn', factor: 4 } }),
    );
    const b = await runCli('policy', 'init', '--config', bad, '--out', join(dir, 'x'));
    t.equal(b.code, 1);
    t.match(b.err, /bad\.json: config key 'rope_scaling' of type "yarn" is not supported/);
    t.equal(b.err.trim().split('\n').length, 1, 'one line');
  },
);

t.test('policy info: parameters and memory for weights, gradients, AdamW and a KV cache', async (t) => {
  const r = await runCli(
    'policy',
    'info',
    '--checkpoint',
    ckpt,
    '--batch',
    '4',
    '--context',
    '32',
    '--threads',
    '1',
    '--weights-dtype',
    'keep',
  );
  t.equal(r.code, 0, r.err);
  // embed 19x12 = 228; per layer q 24x12 + k 12x12 + v 12x12 + o 12x24 = 864, q/k norm 6 + 6,
  // two norms 12 + 12, gate/up/down 3 x 20x12 = 720: 1620; final norm 12, tied head:
  // 228 + 2 x 1620 + 12 = 3480 parameters = 13,920 bytes in float32.
  t.match(r.out, /architecture: qwen3/);
  t.match(r.out, /parameters: 3480\n/);
  // KV cache: 2 x 2 layers x 2 KV heads x 6 x 4 bytes = 192 B per token; x 4 x 32 = 24 KiB.
  t.match(
    r.out,
    /weights 13\.6 KiB, gradients 13\.6 KiB, AdamW state 27\.2 KiB, KV cache 24\.0 KiB \(batch 4 x context 32; 192 B per token\)/,
  );
  // Training step (memory.ts trainStepPeak): 120 MiB runtime + 5 x 3480 x 4 state + folded zeros
  // 19 x 12 x 4 + 124 x 19 x 4 (one chunk: 883,011 rows fit 64 MiB) + the head phase 912 +
  // activations 2 x 4 x 32 x 60 x 12 x 4 = 737,280 + 3.9 x 124 x 19 x 4 = 126,684,001.6 B = 121 MiB.
  t.match(
    r.out,
    /training step peak \(CPU, float32, optimizer 'host', batch 4 x 32\): ~121 MiB resident \(head in chunks of 883011 positions/,
  );
  // keep: the BF16 checkpoint's weights are fed in 2 bytes each, 6,960 B.
  t.match(r.out, /inference weights \(bfloat16, --weights-dtype\): 6\.80 KiB fed/);
  t.match(r.out, /nodes per provider \(decode-step graph\): CPUExecutionProvider \d+/);
});

t.test('policy logprobs and greedy sample equal the float64 reference of the loaded weights', async (t) => {
  const params = (await loadCheckpoint(ckpt)).params;
  const seqs = [
    [1, 2, 3, 4, 5, 6],
    [7, 8],
  ];
  const input = join(dir, 'seqs.json');
  writeFileSync(input, JSON.stringify({ sequences: seqs }));
  const r = await runCli('policy', 'logprobs', '--checkpoint', ckpt, '--input', input, '--threads', '1');
  t.equal(r.code, 0, r.err);
  const got = JSON.parse(r.out).logprobs as number[][];
  for (const [i, s] of seqs.entries()) {
    const ref = refLlamaLogprobs(cfg, params, s);
    t.ok(Math.max(...ref.map((v, k) => Math.abs(v - got[i][k]))) < 1e-4, `sequence ${i}`);
  }
  // The checkpoint is BF16: kept in bfloat16, the graphs widen back the very values float32 holds.
  const kept = await runCli(
    'policy',
    'logprobs',
    '--checkpoint',
    ckpt,
    '--input',
    input,
    '--threads',
    '1',
    '--weights-dtype',
    'keep',
  );
  t.equal(kept.code, 0, kept.err);
  t.same(JSON.parse(kept.out).logprobs, got, '--weights-dtype keep: the same logprobs');
  const badDtype = await runCli(
    'policy',
    'logprobs',
    '--checkpoint',
    ckpt,
    '--input',
    input,
    '--weights-dtype',
    'int8',
  );
  t.equal(badDtype.code, 2);
  t.match(badDtype.err, /--weights-dtype must be/);
  const s = await runCli(
    'policy',
    'sample',
    '--checkpoint',
    ckpt,
    '--tokens',
    '4,5',
    '--max-new',
    '4',
    '--temperature',
    '0',
    '--threads',
    '1',
  );
  t.equal(s.code, 0, s.err);
  const ctx = [4, 5];
  for (const tok of JSON.parse(s.out).tokens as number[]) {
    const logits = refLlamaLogits(cfg, params, ctx).at(-1)!;
    t.equal(tok, logits.indexOf(Math.max(...logits)));
    ctx.push(tok);
  }
});
