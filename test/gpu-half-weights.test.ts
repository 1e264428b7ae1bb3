/**
 * Inference graphs that take their weights in 16 bits (model-inputs.ts `WeightsDtype`): float16
 * fed as float16 and widened by Cast, bfloat16 fed as its uint16 bits and widened by a table.
 * Widening is exact, so on weights already rounded to 16 bits (what a BF16/F16 checkpoint loads
 * as) the 16-bit graphs compute on the very float32 values the float32 graphs do: logprobs and
 * decoded tokens must agree to float32 round-off of the same arithmetic, and are asserted to 1e-6
 * (observed: equal). On float32 weights the difference is the rounding of the weights alone.
 */
import t from 'tap';
import { parsePolicyConfig } from '../src/gpu/architecture.js';
import type { Params } from '../src/gpu/config.js';
import { Graph } from '../src/gpu/graph/index.js';
import type { LlamaConfig } from '../src/gpu/llama-config.js';
import { declareParamInputs, param, type WeightsDtype } from '../src/gpu/model-inputs.js';
import { PolicyRuntime } from '../src/gpu/policy-runtime.js';
import { bf16ToFloat32, f16ToFloat32, float32ToBf16, float32ToF16 } from '../src/gpu/safetensors.js';
import { loadOrt } from '../src/gpu/session.js';
import { refLlamaLogprobs } from './helpers/ref-llama.js';
import { TINY_LLAMA_JSON, tinyLlamaParams } from './helpers/tiny-llama.js';

const SEQS = [
  [1, 5, 7, 2, 9, 12, 3, 17, 4],
  [4, 11, 6],
];

/** The weights as a 16-bit checkpoint holds them: each value rounded to that type. */
function rounded(params: Params, weights: WeightsDtype): Params {
  const round =
    weights === 'float16'
      ? (w: Float32Array) => f16ToFloat32(float32ToF16(w))
      : (w: Float32Array) => bf16ToFloat32(float32ToBf16(w));
  return new Map([...params].map(([k, w]) => [k, round(w)]));
}

const maxDiff = (a: number[][], b: number[][]) =>
  Math.max(...a.flatMap((row, i) => row.map((x, k) => Math.abs(x - b[i][k]))));

t.test('bfloat16 bits widen exactly: all 65,536 patterns = the float32 with those bits on top', async (t) => {
  const ort = await loadOrt();
  const g = new Graph({ name: 'bf16' });
  const p = declareParamInputs(g, [{ name: 'w', shape: [65536] }], 'float32', 'bfloat16');
  g.output(param(p, 'w'), 'y');
  const session = await ort.InferenceSession.create(g.serialize());
  const bits = Uint16Array.from({ length: 65536 }, (_, i) => i);
  const y = (await session.run({ w: new ort.Tensor('uint16', bits, [65536]) })).y.data as Float32Array;
  // The definition of bfloat16: the upper half of a float32's bits.
  const expected = new Float32Array(new Uint32Array(Array.from(bits, (b) => (b << 16) >>> 0)).buffer);
  const gotBits = new Uint32Array(y.buffer, y.byteOffset, y.length);
  const wantBits = new Uint32Array(expected.buffer);
  let bad = 0;
  for (let i = 0; i < 65536; i++) {
    const nan = Number.isNaN(expected[i]);
    if (nan ? !Number.isNaN(y[i]) : gotBits[i] !== wantBits[i]) bad++;
  }
  t.equal(bad, 0, 'every pattern (NaNs stay NaN)');
  await session.release();
});

for (const family of ['qwen3', 'llama'] as const) {
  for (const weights of ['float16', 'bfloat16'] as const) {
    t.test(`${family}, ${weights} weights: logprobs and decoding = the float32 graphs`, async (t) => {
      const cfg = parsePolicyConfig(TINY_LLAMA_JSON[family]) as LlamaConfig;
      const exact = rounded(tinyLlamaParams(cfg, 4), weights);
      const opts = { device: 'cpu' as const, intraOpThreads: 1 };
      await using half = await PolicyRuntime.create(cfg, exact, { ...opts, weights });
      await using full = await PolicyRuntime.create(cfg, exact, opts);
      const [h, f] = [await half.logprobs(SEQS), await full.logprobs(SEQS)];
      t.ok(maxDiff(h, f) <= 1e-6, `rounded weights: |16-bit - float32| = ${maxDiff(h, f).toExponential(1)}`);
      const ref = SEQS.map((s) => refLlamaLogprobs(cfg, exact, s));
      t.ok(maxDiff(h, ref) < 1e-4, `= float64 reference: ${maxDiff(h, ref).toExponential(1)}`);
      const reqs = [
        { prompt: [3, 1, 4], maxNewTokens: 6, seed: 1, temperature: 1 },
        { prompt: [2], maxNewTokens: 6, seed: 2, temperature: 1 },
      ];
      const [dh, df] = [await half.generateBatch(reqs), await full.generateBatch(reqs)];
      t.same(
        dh.map((r) => r.tokens),
        df.map((r) => r.tokens),
        'the same sampled tokens',
      );
      t.ok(
        maxDiff(
          dh.map((r) => r.policyLogprobs),
          df.map((r) => r.policyLogprobs),
        ) <= 1e-6,
        'the same decode logprobs',
      );

      // On unrounded float32 weights the 16-bit graphs run the rounded model.
      const raw = tinyLlamaParams(cfg, 4);
      await using halfRaw = await PolicyRuntime.create(cfg, raw, { ...opts, weights });
      const hr = await halfRaw.logprobs(SEQS);
      t.ok(maxDiff(hr, h) <= 1e-6, 'fed 16-bit: the rounding happens when the weights are fed');
      await using fullRaw = await PolicyRuntime.create(cfg, raw, opts);
      const fr = await fullRaw.logprobs(SEQS);
      t.ok(
        maxDiff(hr, fr) > 1e-5,
        `which differs from the float32 model: ${maxDiff(hr, fr).toExponential(1)}`,
      );
    });
  }
}
