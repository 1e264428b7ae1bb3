/**
 * The Llama family end to end on tiny random models: config.json parsed, checkpoint saved (F32,
 * BF16, F16, sharded) and loaded by the policy runtime, whose logprobs equal an independent
 * float64 forward (test/helpers/ref-llama.ts) to 1e-4; KV-cache decoding (prefill + cached steps,
 * left-padded batch) gives the same logprobs as the full forward and the reference.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { architecture, parsePolicyConfig } from '../src/gpu/architecture.js';
import { loadCheckpoint, type SaveOptions, saveCheckpoint } from '../src/gpu/checkpoint.js';
import type { LlamaConfig } from '../src/gpu/llama-config.js';
import { PolicyRuntime } from '../src/gpu/policy-runtime.js';
import { bf16ToFloat32, float32ToBf16 } from '../src/gpu/safetensors.js';
import { refLlamaLogits, refLlamaLogprobs } from './helpers/ref-llama.js';
import { TINY_LLAMA_JSON, tinyLlamaParams } from './helpers/tiny-llama.js';

function tmp(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-llama-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const SEQS = [
  [1, 5, 7, 2, 9, 12, 3, 17, 4],
  [4, 11, 6],
  [18, 0, 0, 3, 3, 3, 10],
];

const ARCH_NOTE: Record<keyof typeof TINY_LLAMA_JSON, string> = {
  qwen3: 'GQA 4/2 heads, head_dim 6 != 12/4, q/k norm, tied',
  qwen2: 'q/k/v biases, GQA 4/2, untied',
  llama: 'MQA 4/1, attention + mlp biases, untied',
};

const VARIANTS: Array<{ name: string; save: SaveOptions }> = [
  { name: 'F32 model.safetensors', save: {} },
  { name: 'BF16 model.safetensors', save: { dtype: 'BF16' } },
  { name: 'F32 in shards', save: { maxShardBytes: 2000 } },
];

for (const family of ['qwen3', 'qwen2', 'llama'] as const) {
  const json = TINY_LLAMA_JSON[family];
  const cfg = parsePolicyConfig(json) as LlamaConfig;
  for (const { name, save } of VARIANTS) {
    t.test(
      `${family} (${ARCH_NOTE[family]}): ${name} -> runtime logprobs = float64 reference to 1e-4`,
      async (t) => {
        const dir = tmp(t);
        const params = tinyLlamaParams(cfg, 7);
        await saveCheckpoint(dir, { config: cfg, params }, save);
        const files = readdirSync(dir);
        if (save.maxShardBytes) {
          t.ok(
            files.includes('model.safetensors.index.json') && !files.includes('model.safetensors'),
            'sharded',
          );
          t.ok(
            files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f)).length >= 3,
            `shards: ${files}`,
          );
        } else t.ok(files.includes('model.safetensors'));
        const saved = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
        t.equal(saved.torch_dtype, save.dtype === 'BF16' ? 'bfloat16' : 'float32');
        t.same(saved.architectures, [json.architectures[0]]);

        const loaded = (await loadCheckpoint(dir)).params;
        if (save.dtype === 'BF16') {
          // Loading widens the stored bfloat16 exactly: the values are the bf16 roundings.
          const w = params.get('model.layers.0.self_attn.q_proj.weight')!;
          t.same(
            Array.from(loaded.get('model.layers.0.self_attn.q_proj.weight')!),
            Array.from(bf16ToFloat32(float32ToBf16(w))),
          );
          t.not(
            loaded.get('model.layers.0.self_attn.q_proj.weight')![0],
            w[0],
            'rounded, not the float32 values',
          );
        }
        await using rt = await PolicyRuntime.fromCheckpoint(dir, { device: 'cpu', intraOpThreads: 1 });
        const got = await rt.logprobs(SEQS);
        let worst = 0;
        SEQS.forEach((s, i) => {
          const ref = refLlamaLogprobs(cfg, loaded, s);
          t.equal(got[i].length, s.length - 1);
          ref.forEach((r, k) => {
            worst = Math.max(worst, Math.abs(r - got[i][k]));
          });
        });
        t.ok(worst < 1e-4, `worst |logprob - reference| = ${worst.toExponential(2)}`);
        // The model is far from uniform, so agreement is not a coincidence of flat distributions.
        const spread = Math.max(...got.flat()) - Math.min(...got.flat());
        t.ok(spread > 2, `logprobs spread ${spread.toFixed(2)} nats`);
      },
    );
  }
}

t.test('F16 checkpoints load too (widened exactly to float32)', async (t) => {
  const cfg = parsePolicyConfig(TINY_LLAMA_JSON.qwen3) as LlamaConfig;
  const dir = tmp(t);
  await saveCheckpoint(dir, { config: cfg, params: tinyLlamaParams(cfg, 2) }, { dtype: 'F16' });
  const loaded = (await loadCheckpoint(dir)).params;
  await using rt = await PolicyRuntime.fromCheckpoint(dir, { device: 'cpu', intraOpThreads: 1 });
  const [got] = await rt.logprobs([SEQS[0]]);
  const ref = refLlamaLogprobs(cfg, loaded, SEQS[0]);
  t.ok(Math.max(...ref.map((r, k) => Math.abs(r - got[k]))) < 1e-4);
});

t.test('config.json round trip: keys akbe does not interpret are written back by value', async (t) => {
  // A Qwen3 config.json with what transformers, vLLM and generation read besides the shape.
  const source = {
    ...TINY_LLAMA_JSON.qwen3,
    bos_token_id: 1,
    eos_token_id: [2, 3],
    pad_token_id: null,
    torch_dtype: 'bfloat16',
    rope_theta: 1_000_000,
    transformers_version: '4.51.0',
    use_cache: true,
    max_window_layers: 2,
    quantization_note: { kept: ['as', 'is'], depth: { n: 1 } },
  };
  const dir = tmp(t);
  const cfg = parsePolicyConfig(source);
  await saveCheckpoint(
    dir,
    { config: cfg, params: tinyLlamaParams(cfg as LlamaConfig, 1) },
    { dtype: 'BF16' },
  );
  const saved = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  for (const [key, value] of Object.entries(source)) t.strictSame(saved[key], value, key);
  t.same(Object.keys(saved), Object.keys(saved).sort(), 'keys sorted, as transformers writes them');

  // Through the runtime (how training publishes a version), saved as float32: only the dtype changes.
  const again = tmp(t);
  await using rt = await PolicyRuntime.fromCheckpoint(dir, { device: 'cpu', intraOpThreads: 1 });
  await rt.saveCheckpoint(again);
  const resaved = JSON.parse(readFileSync(join(again, 'config.json'), 'utf8'));
  t.same(resaved, { ...saved, torch_dtype: 'float32' }, 'every other key by value');
  t.same((await loadCheckpoint(again)).config, cfg, 'the reloaded config equals the loaded one');
  // A newer transformers' `dtype` key never survives beside the element type actually saved.
  const { torch_dtype: _, ...newer } = { ...source, dtype: 'bfloat16' };
  t.notOk('dtype' in architecture(parsePolicyConfig(newer)).configJson());
});

for (const family of ['qwen3', 'llama'] as const) {
  t.test(`${family}: KV-cache decoding of a left-padded batch = full forward = reference`, async (t) => {
    const cfg = parsePolicyConfig(TINY_LLAMA_JSON[family]) as LlamaConfig;
    const params = tinyLlamaParams(cfg, 5);
    await using rt = await PolicyRuntime.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
    const prompts = [[3, 1, 4, 1, 5, 9], [2, 7], [16]];
    const out = await rt.generateBatch(
      prompts.map((prompt, i) => ({ prompt, maxNewTokens: 6, seed: i, temperature: 1 })),
    );
    let worstScore = 0;
    let worstRef = 0;
    for (const [i, r] of out.entries()) {
      t.equal(r.tokens.length, 6, `row ${i} ran to max tokens`);
      const full = [...prompts[i], ...r.tokens];
      const scored = (await rt.logprobs([full]))[0].slice(prompts[i].length - 1);
      const ref = refLlamaLogprobs(cfg, params, full).slice(prompts[i].length - 1);
      r.policyLogprobs.forEach((lp, k) => {
        worstScore = Math.max(worstScore, Math.abs(lp - scored[k]));
        worstRef = Math.max(worstRef, Math.abs(lp - ref[k]));
      });
    }
    t.ok(worstScore < 1e-4, `decode vs full forward: ${worstScore.toExponential(2)}`);
    t.ok(worstRef < 1e-4, `decode vs float64 reference: ${worstRef.toExponential(2)}`);
  });
}

t.test('greedy decoding picks the reference argmax at every step', async (t) => {
  const cfg = parsePolicyConfig(TINY_LLAMA_JSON.qwen2) as LlamaConfig;
  const params = tinyLlamaParams(cfg, 9);
  await using rt = await PolicyRuntime.create(cfg, params, { device: 'cpu', intraOpThreads: 1 });
  const prompt = [5, 6, 7];
  const [r] = await rt.generateBatch([{ prompt, maxNewTokens: 5, seed: 0, temperature: 0 }]);
  const seq = [...prompt];
  for (const tok of r.tokens) {
    const logits = refLlamaLogits(cfg, params, seq).at(-1)!;
    t.equal(tok, logits.indexOf(Math.max(...logits)));
    seq.push(tok);
  }
});
