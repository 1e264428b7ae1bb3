/**
 * Batch-invariant decoding (config batchInvariantDecode, src/gpu/row-batches.ts CachedRows): a
 * request decodes to the same bits whatever the continuous batcher runs it with. Without it the
 * logprobs move at float rounding with the cache length, a one-row step and the prompts prefilled
 * beside it, which is why repeats of a grid-scale run differ (docs/RESULTS.md, "Reproducibility").
 * The committed base policy, a fixed seed: the request alone is the reference, then it runs beside
 * a partner of another prompt length, beside one with a longer budget, at row 4 of 5, and joining
 * a batch already decoding. Exact equality, logprobs and tokens.
 */
import { resolve } from 'node:path';
import t from 'tap';
import type { GenerateRequest, GenerateResult } from '../src/gpu/decoder.js';
import { PolicyHost } from '../src/gpu/policy-host.js';

const BASE = resolve('assets/base');
const req = (i: number, promptLength = 5, maxNewTokens = 20): GenerateRequest => ({
  prompt: Array.from({ length: promptLength }, (_, k) => 5 + ((i + k) % 50)),
  maxNewTokens,
  seed: 100 + i,
  temperature: 1,
  topP: 1,
  stopTokens: [],
});
const X = { ...req(0), seed: 999 };

/** X's result in each company, the first alone. */
async function companies(host: PolicyHost): Promise<Record<string, GenerateResult>> {
  const first = (rs: GenerateRequest[], k = 0) =>
    Promise.all(rs.map((r) => host.generate(r))).then((o) => o[k]);
  const out: Record<string, GenerateResult> = {};
  out.alone = await host.generate(X);
  out['beside a 9-token prompt'] = await first([X, req(1, 9)]);
  out['beside a 60-token budget'] = await first([X, req(1, 5, 60)]);
  out['row 4 of 5'] = await first([req(1), req(2), req(3), req(4), X], 4);
  const running = host.generate(req(1, 7, 60));
  await new Promise((r) => setTimeout(r, 20));
  out['joining a running batch'] = await host.generate(X);
  await running;
  return out;
}

t.test('batch-invariant: the same bits in every company', async (t) => {
  const host = await PolicyHost.start({ checkpoint: BASE, intraOpThreads: 1, batchInvariant: true });
  t.teardown(() => host.close());
  const got = await companies(host);
  const alone = got.alone;
  t.equal(alone.tokens.length, 20, 'a full-length decode (nothing stopped it early)');
  for (const [name, r] of Object.entries(got)) {
    t.same(r.tokens, alone.tokens, `${name}: tokens`);
    t.same(Array.from(r.policyLogprobs), Array.from(alone.policyLogprobs), `${name}: logprobs, bit for bit`);
  }
});

t.test('the default decoder is not batch-invariant (what the option is for)', async (t) => {
  const host = await PolicyHost.start({ checkpoint: BASE, intraOpThreads: 1 });
  t.teardown(() => host.close());
  const got = await companies(host);
  const moved = Object.entries(got).filter(([, r]) =>
    r.policyLogprobs.some((x, i) => x !== got.alone.policyLogprobs[i]),
  );
  t.ok(moved.length >= 1, `logprobs moved in: ${moved.map(([n]) => n).join(', ')}`);
  for (const [name, r] of moved) {
    const most = Math.max(...r.policyLogprobs.map((x, i) => Math.abs(x - got.alone.policyLogprobs[i])));
    t.ok(most < 1e-4, `${name}: by float rounding only (${most.toExponential(1)})`);
  }
});
