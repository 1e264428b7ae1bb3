/** GPT config validation, the contract's parameter layout, and GPT-2 initialisation. */
import t from 'tap';
import {
  countParams,
  DEFAULT_GPT_CONFIG,
  gpt2ParamShapes,
  InvalidGPTConfigError,
  initParams,
  validateGPTConfig,
} from '../src/gpu/config.js';

t.test('validateGPTConfig accepts a Hugging Face config.json and fills GPT-2 defaults', async (t) => {
  const hf = {
    architectures: ['GPT2LMHeadModel'],
    model_type: 'gpt2',
    vocab_size: 50,
    n_embd: 8,
    n_layer: 2,
    n_head: 2,
    n_positions: 16,
  };
  t.same(validateGPTConfig(hf), {
    vocab_size: 50,
    n_embd: 8,
    n_layer: 2,
    n_head: 2,
    n_positions: 16,
    layer_norm_epsilon: 1e-5,
    activation_function: 'gelu_new',
  });
});

t.test('validateGPTConfig names the bad key (and the file)', async (t) => {
  const ok = { ...DEFAULT_GPT_CONFIG };
  t.throws(() => validateGPTConfig({ ...ok, n_layer: 0 }, 'c.json'), {
    name: 'InvalidGPTConfigError',
    key: 'n_layer',
    message: /^c\.json: config key 'n_layer'/,
  });
  t.throws(() => validateGPTConfig({ ...ok, vocab_size: undefined }), {
    key: 'vocab_size',
    message: /is missing/,
  });
  t.throws(() => validateGPTConfig({ ...ok, n_head: 3 }), { key: 'n_head', message: /must divide n_embd/ });
  t.throws(() => validateGPTConfig({ ...ok, activation_function: 'relu' }), {
    key: 'activation_function',
    name: 'InvalidGPTConfigError',
  });
  t.throws(() => validateGPTConfig({ ...ok, layer_norm_epsilon: -1 }), {
    key: 'layer_norm_epsilon',
    name: 'InvalidGPTConfigError',
  });
  t.throws(() => validateGPTConfig([1, 2]), InvalidGPTConfigError);
});

t.test('gpt2ParamShapes lists GPT2LMHeadModel names in the contract order, Conv1D [in, out]', async (t) => {
  const cfg = { ...DEFAULT_GPT_CONFIG, n_layer: 1, vocab_size: 10, n_embd: 4, n_head: 2, n_positions: 6 };
  t.same(
    gpt2ParamShapes(cfg).map((p) => `${p.name} [${p.shape}]`),
    [
      'wte.weight [10,4]',
      'wpe.weight [6,4]',
      'h.0.ln_1.weight [4]',
      'h.0.ln_1.bias [4]',
      'h.0.attn.c_attn.weight [4,12]',
      'h.0.attn.c_attn.bias [12]',
      'h.0.attn.c_proj.weight [4,4]',
      'h.0.attn.c_proj.bias [4]',
      'h.0.ln_2.weight [4]',
      'h.0.ln_2.bias [4]',
      'h.0.mlp.c_fc.weight [4,16]',
      'h.0.mlp.c_fc.bias [16]',
      'h.0.mlp.c_proj.weight [16,4]',
      'h.0.mlp.c_proj.bias [4]',
      'ln_f.weight [4]',
      'ln_f.bias [4]',
    ],
  );
  // The d256 4-layer policy: 12 L D^2 + 13 L D + V D + P D + 2 D
  t.equal(
    countParams(DEFAULT_GPT_CONFIG),
    12 * 4 * 256 ** 2 + 13 * 4 * 256 + 512 * 256 + 256 * 256 + 2 * 256,
  );
});

t.test(
  'initParams is seeded and follows GPT-2 (std 0.02, residual projections scaled, LN 1/0)',
  async (t) => {
    const cfg = { ...DEFAULT_GPT_CONFIG, n_layer: 8, n_embd: 64, vocab_size: 64, n_positions: 32 };
    const a = initParams(cfg, 7);
    t.same(
      a.get('h.3.mlp.c_fc.weight'),
      initParams(cfg, 7).get('h.3.mlp.c_fc.weight'),
      'same seed, same weights',
    );
    t.not(a.get('wte.weight')![0], initParams(cfg, 8).get('wte.weight')![0], 'other seed, other weights');
    const std = (x: Float32Array) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length);
    t.ok(Math.abs(std(a.get('h.0.mlp.c_fc.weight')!) - 0.02) < 0.001, 'weights ~ N(0, 0.02)');
    t.ok(
      Math.abs(std(a.get('h.0.mlp.c_proj.weight')!) - 0.02 / Math.sqrt(16)) < 0.0005,
      'c_proj ~ N(0, 0.02 / sqrt(2 L))',
    );
    t.ok(
      a.get('ln_f.weight')!.every((v) => v === 1) && a.get('h.2.ln_1.bias')!.every((v) => v === 0),
      'LayerNorm 1 / 0',
    );
    t.ok(
      a.get('h.0.attn.c_attn.bias')!.every((v) => v === 0),
      'biases 0',
    );
  },
);
