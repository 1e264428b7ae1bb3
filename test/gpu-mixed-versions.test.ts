/**
 * One decode pass for every policy version in flight (issue 25 item 3): the continuous batcher
 * steps the batches of all versions with rows in one forward (OrtDecodeBackend.stepMany, n copies
 * of the step graph in one session), and each row decodes exactly as it does with its version
 * alone: the same tokens and the same logprobs to the bit, on the GPT-2 and Qwen3 tiny policies,
 * batch-invariant or not, with a one-row batch among them. Real ORT sessions; seconds.
 */
import t, { type Test } from 'tap';
import { type PolicyConfig, parsePolicyConfig } from '../src/gpu/architecture.js';
import type { Params } from '../src/gpu/config.js';
import { ContinuousBatcher } from '../src/gpu/continuous.js';
import type { GenerateRequest, GenerateResult } from '../src/gpu/decoder.js';
import { OrtDecodeBackend } from '../src/gpu/ort-policy.js';
import { TINY_LLAMA_JSON, tinyLlamaParams } from './helpers/tiny-llama.js';
import { TINY_CFG, tinyParams } from './helpers/tiny-policy.js';

const session = { device: 'cpu' as const, intraOpThreads: 1 };
const qwen3 = parsePolicyConfig(TINY_LLAMA_JSON.qwen3);

const FAMILIES: Array<{ name: string; cfg: PolicyConfig; params: (seed: number) => Params }> = [
  { name: 'gpt2', cfg: TINY_CFG, params: (seed) => tinyParams(seed) },
  { name: 'qwen3', cfg: qwen3, params: (seed) => tinyLlamaParams(qwen3 as never, seed) },
];

/** A backend holding versions 0, 1, 2 (three parameter sets), the current parameters v2's. */
async function threeVersions(
  t: Test,
  cfg: PolicyConfig,
  params: (seed: number) => Params,
  opts: { batchInvariant?: boolean; concatCache?: boolean },
) {
  const b = await OrtDecodeBackend.create(cfg, params(3), session, opts);
  t.teardown(() => b.release());
  b.holdVersion(0, 3);
  b.setParams(params(99));
  b.holdVersion(1, 3);
  b.setParams(params(7));
  b.holdVersion(2, 3);
  return b;
}

const request = (i: number): GenerateRequest => ({
  prompt: [1 + (i % 5), 2, 3 + (i % 3), 4].slice(0, 1 + (i % 4)),
  maxNewTokens: 3 + (i % 7),
  seed: 500 + i,
  temperature: i % 3 ? 1 : 0,
});

const batcher = (backend: OrtDecodeBackend) =>
  new ContinuousBatcher(async () => backend, { maxBatch: 64, maxBatchTokens: 4096, windowMs: 0 });

function sameBits(t: Test, got: GenerateResult, want: GenerateResult, what: string) {
  t.same(got.tokens, want.tokens, `${what}: tokens`);
  t.same(
    Buffer.from(Float64Array.from(got.policyLogprobs).buffer),
    Buffer.from(Float64Array.from(want.policyLogprobs).buffer),
    `${what}: policy logprobs to the bit`,
  );
  t.same(got.logprobs, want.logprobs, `${what}: sampling logprobs`);
}

for (const { name, cfg, params } of FAMILIES) {
  const modes = [
    { label: 'batch-invariant', opts: { batchInvariant: true } },
    { label: 'default', opts: {} },
    // model.ts's Concat-grown cache: stepMany steps the batches one after the other.
    { label: 'concat cache', opts: { concatCache: true } },
  ];
  for (const { label, opts } of modes) {
    t.test(`${name}, ${label}: mixed versions decode as each version alone`, async (t) => {
      const backend = await threeVersions(t, cfg, params, opts);
      // 13 requests: version i % 3, so v0 gets 5 rows, v1 4 and v2 4, and as rows finish at
      // different lengths each version's batch shrinks to one row (the two-row trick) and to none.
      const reqs = Array.from({ length: 13 }, (_, i) => ({ ...request(i), version: i % 3 }));
      const alone: GenerateResult[] = new Array(reqs.length);
      for (const v of [0, 1, 2]) {
        const b = batcher(backend);
        const mine = reqs.map((r, i) => [r, i] as const).filter(([r]) => r.version === v);
        const got = await Promise.all(mine.map(([r]) => b.generate(r)));
        mine.forEach(([, i], k) => {
          alone[i] = got[k];
        });
        t.equal(b.stats.sharedPasses, 0, `v${v} alone: one batch, no shared pass`);
        await b.close();
      }
      const b = batcher(backend);
      const mixed = await Promise.all(reqs.map((r) => b.generate(r)));
      t.ok(
        b.stats.sharedPasses > 0,
        `the versions' batches stepped in shared passes (${b.stats.sharedPasses})`,
      );
      for (const [i, g] of mixed.entries()) sameBits(t, g, alone[i], `request ${i} on v${reqs[i].version}`);
      t.notSame(
        mixed.filter((_, i) => i % 3 === 0).map((r) => r.policyLogprobs[0]),
        mixed.filter((_, i) => i % 3 === 1).map((r) => r.policyLogprobs[0]),
        'the versions decode differently (each on its own parameters)',
      );
      await b.close();
    });
  }
}

t.test('stepMany returns what each batch own step returns, to the bit', async (t) => {
  const backend = await threeVersions(t, TINY_CFG, (s) => tinyParams(s), { batchInvariant: true });
  const open = async () => {
    const batches = [backend.open(0), backend.open(1), backend.open(2)];
    await batches[0].prefill([[1, 2, 3], [4]], [10, 10]);
    await batches[1].prefill([[5, 6]], [10]); // one row: runs as two
    await batches[2].prefill([[7], [8, 9], [1, 1, 2]], [10, 10, 10]);
    return batches;
  };
  const tokens = [[3, 4], [5], [6, 7, 8]];
  const separate = await open();
  const together = await open();
  for (let k = 0; k < 3; k++) {
    const want = await Promise.all(separate.map((b, i) => b.step(tokens[i])));
    const got = await backend.stepMany(together.map((batch, i) => ({ batch, tokens: tokens[i] })));
    for (let i = 0; i < 3; i++)
      t.same(
        Buffer.from(got[i].buffer, got[i].byteOffset, got[i].byteLength),
        Buffer.from(want[i].buffer, want[i].byteOffset, want[i].byteLength),
        `step ${k}, batch v${i}: logits to the bit`,
      );
  }
});
