/**
 * Llama-family config.json parsing (family defaults, refusals that name the key), the parameter
 * layout against the published Qwen3-0.6B size, the init scheme, and the memory figures of
 * `akbe policy info`, hand-worked.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { architecture, countParams, parsePolicyConfig } from '../src/gpu/architecture.js';
import { InvalidPolicyConfigError } from '../src/gpu/config.js';
import { InvalidLlamaConfigError, initLlamaParams, type LlamaConfig } from '../src/gpu/llama-config.js';
import { formatBytes, memoryEstimate } from '../src/gpu/memory.js';
import { TINY_LLAMA_JSON } from './helpers/tiny-llama.js';

/** Qwen3-0.6B's config.json as published (weights are not needed for its shape). */
const QWEN3_0_6B = JSON.parse(
  readFileSync(new URL('../bench/configs/qwen3-0.6b.json', import.meta.url), 'utf8'),
);

t.test('Qwen3-0.6B: 596,049,920 parameters (0.44B without the embedding, as published)', (t) => {
  const cfg = parsePolicyConfig(QWEN3_0_6B) as LlamaConfig;
  t.equal(cfg.head_dim, 128, 'head_dim kept although hidden / heads = 64');
  t.equal(countParams(cfg), 596_049_920);
  t.equal(countParams(cfg) - 151936 * 1024, 440_467_456);
  t.notOk(
    architecture(cfg)
      .paramShapes()
      .some((p) => p.name === 'lm_head.weight'),
    'tied: no lm_head',
  );
  t.end();
});

t.test('memory of Qwen3-0.6B: 224 KiB of float32 KV cache per token (2 x 28 layers x 8 heads x 128)', (t) => {
  const m = memoryEstimate(parsePolicyConfig(QWEN3_0_6B), { batch: 16, context: 1024 });
  t.equal(m.kvCachePerToken, 2 * 28 * 8 * 128 * 4);
  t.equal(formatBytes(m.kvCachePerToken), '224 KiB');
  t.equal(m.kvCache, 229_376 * 16 * 1024);
  t.equal(formatBytes(m.kvCache), '3.50 GiB');
  t.equal(m.weights, 596_049_920 * 4);
  t.equal(m.adamw, 2 * m.gradients);
  t.equal(formatBytes(m.weights), '2.22 GiB');
  t.equal(formatBytes(96), '96 B');
  t.end();
});

t.test(
  'family defaults: Qwen2 q/k/v biases, no head_dim = hidden / heads, MHA without num_key_value_heads',
  (t) => {
    const q2 = parsePolicyConfig(TINY_LLAMA_JSON.qwen2) as LlamaConfig;
    const names = architecture(q2)
      .paramShapes()
      .map((p) => p.name);
    t.ok(names.includes('model.layers.0.self_attn.q_proj.bias'));
    t.notOk(names.includes('model.layers.0.self_attn.o_proj.bias'), 'Qwen2 o_proj has no bias');
    t.notOk(names.some((n) => n.includes('q_norm')));
    t.equal(q2.head_dim, 4);
    const { num_key_value_heads: _, ...mha } = TINY_LLAMA_JSON.llama;
    t.equal((parsePolicyConfig(mha) as LlamaConfig).num_key_value_heads, 4);
    // architectures alone identify the family.
    const { model_type: __, ...noType } = TINY_LLAMA_JSON.qwen3;
    t.equal((parsePolicyConfig(noType) as LlamaConfig).model_type, 'qwen3');
    t.end();
  },
);

t.test('unsupported features are refused naming the file, the key and the way out', (t) => {
  const bad = (patch: Record<string, unknown>, re: RegExp) =>
    t.throws(() => parsePolicyConfig({ ...TINY_LLAMA_JSON.qwen3, ...patch }, 'c.json'), re);
  bad(
    { rope_scaling: { rope_type: 'yarn', factor: 4 } },
    /c\.json: config key 'rope_scaling' of type "yarn" is not supported/,
  );
  bad({ rope_scaling: { type: 'linear', factor: 2 } }, /'rope_scaling' of type "linear"/);
  bad({ use_sliding_window: true }, /'use_sliding_window' is not supported .*set it to false/);
  bad({ hidden_act: 'gelu' }, /'hidden_act' must be 'silu'/);
  bad({ num_key_value_heads: 3 }, /'num_key_value_heads' must divide num_attention_heads \(4\)/);
  bad({ head_dim: 5 }, /'head_dim' must be even/);
  bad({ hidden_size: 0 }, /'hidden_size' must be a positive integer/);
  t.throws(
    () => parsePolicyConfig({ model_type: 'mistral' }, 'm.json'),
    /m\.json: config key 'model_type' 'mistral' is not supported \(supported: gpt2, llama, qwen2, qwen3\)/,
  );
  t.ok(parsePolicyConfig({ ...TINY_LLAMA_JSON.qwen3, rope_scaling: { rope_type: 'default' } }));
  const e = (() => {
    try {
      parsePolicyConfig({ ...TINY_LLAMA_JSON.qwen3, rope_theta: -1 }, 'c.json');
    } catch (err) {
      return err;
    }
  })();
  t.ok(e instanceof InvalidLlamaConfigError && e instanceof InvalidPolicyConfigError, 'one error family');
  t.match(e, { name: 'InvalidLlamaConfigError', key: 'rope_theta', file: 'c.json' });
  t.end();
});

t.test('init: matrices ~ N(0, initializer_range), biases 0, RMSNorm weights 1', (t) => {
  const cfg = parsePolicyConfig({
    ...TINY_LLAMA_JSON.llama,
    hidden_size: 64,
    intermediate_size: 128,
    initializer_range: 0.05,
  }) as LlamaConfig;
  const p = initLlamaParams(cfg, 3);
  const w = p.get('model.layers.1.mlp.up_proj.weight')!;
  const std = Math.sqrt(w.reduce((s, v) => s + v * v, 0) / w.length);
  t.ok(Math.abs(std - 0.05) < 0.003, `std ${std}`);
  t.ok(p.get('model.layers.0.mlp.up_proj.bias')!.every((v) => v === 0));
  t.ok(p.get('model.layers.0.input_layernorm.weight')!.every((v) => v === 1));
  t.ok(p.get('model.norm.weight')!.every((v) => v === 1));
  t.same(
    Array.from(initLlamaParams(cfg, 3).get('lm_head.weight')!.subarray(0, 4)),
    Array.from(p.get('lm_head.weight')!.subarray(0, 4)),
    'same seed, same policy',
  );
  t.end();
});
