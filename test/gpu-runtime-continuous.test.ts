import t, { type Test } from 'tap';
import { ContinuousBatcher, type ContinuousOptions, DecoderClosedError } from '../src/gpu/continuous.js';
import { decodeBatch, type GenerateRequest, type GenerateResult, survivors } from '../src/gpu/decoder.js';
import { OrtDecodeBackend } from '../src/gpu/ort-policy.js';
import { lengthGroups } from '../src/gpu/row-batches.js';
import { Rng } from '../src/util/rng.js';
import { TINY_CFG, tinyParams } from './helpers/tiny-policy.js';

const cfg = TINY_CFG;
const params = tinyParams(3);
const session = { device: 'cpu' as const, intraOpThreads: 1 };

async function backends(t: Test) {
  const cached = await OrtDecodeBackend.create(cfg, params, session);
  const concat = await OrtDecodeBackend.create(cfg, params, session, { concatCache: true });
  t.teardown(async () => {
    await cached.release();
    await concat.release();
  });
  return { cached, concat };
}

function batcher(backend: OrtDecodeBackend, opts: Partial<ContinuousOptions> = {}) {
  return new ContinuousBatcher(async () => backend, {
    maxBatch: 64,
    maxBatchTokens: 4096,
    windowMs: 0,
    ...opts,
  });
}

/** Varied requests: prompt lengths 1-6, 3-14 new tokens, greedy and sampled, some with stop tokens. */
function request(i: number): GenerateRequest {
  const rng = new Rng(500 + i);
  return {
    prompt: Array.from({ length: 1 + (i % 6) }, () => rng.int(13)),
    maxNewTokens: 3 + ((i * 5) % 12),
    seed: 9000 + i,
    temperature: [1, 0.7, 0, 1.4][i % 4],
    topP: i % 3 === 0 ? 0.8 : 1,
    ...(i % 5 === 2 ? { stopTokens: [4] } : {}),
  };
}

/** Token-for-token equality with the request decoded alone; logprobs to float32 noise. */
async function equalsAlone(
  t: Test,
  backend: OrtDecodeBackend,
  reqs: GenerateRequest[],
  got: GenerateResult[],
) {
  let worst = 0;
  for (const [i, req] of reqs.entries()) {
    const [alone] = await decodeBatch(backend, [req]);
    t.same(got[i].tokens, alone.tokens, `request ${i} tokens`);
    t.equal(got[i].finishReason, alone.finishReason, `request ${i} finish`);
    alone.policyLogprobs.forEach((lp, k) => {
      worst = Math.max(worst, Math.abs(lp - got[i].policyLogprobs[k]));
    });
  }
  t.ok(worst < 1e-5, `max |logprob - alone| = ${worst}`);
}

t.test(
  'requests joining mid-decode (a rollout back from a tool) decode exactly as they would alone',
  async (t) => {
    const { cached, concat } = await backends(t);
    for (const [name, backend] of [
      ['in-place cache', cached],
      ['concat cache', concat],
    ] as const) {
      const b = batcher(backend);
      // Six rollouts start together; whenever one finishes, its follow-up turn (a longer prompt:
      // the old one plus its tokens) is sent at once, as the rollout machine does after a search.
      const reqs: GenerateRequest[] = [];
      const results: GenerateResult[] = [];
      const send = async (req: GenerateRequest, turns: number): Promise<void> => {
        const i = reqs.push(req) - 1;
        results[i] = await b.generate(req);
        if (turns > 1) {
          const prompt = [...req.prompt, ...results[i].tokens].slice(-6);
          await send({ ...request(i + 40), prompt }, turns - 1);
        }
      };
      await Promise.all(Array.from({ length: 6 }, (_, i) => send(request(i), 3)));
      t.equal(reqs.length, 18);
      t.ok(b.stats.joinedRunning > 0, `${name}: ${b.stats.joinedRunning} requests joined a running batch`);
      t.ok(b.stats.largestBatch <= 6);
      await equalsAlone(t, backend, reqs, results);
      await b.close();
    }
  },
);

t.test('a burst is prefilled in one forward; rows leave as they stop', async (t) => {
  const { cached } = await backends(t);
  const b = batcher(cached, { windowMs: 20 });
  const reqs = Array.from({ length: 12 }, (_, i) => request(i));
  const results = await Promise.all(reqs.map((r) => b.generate(r)));
  t.equal(b.stats.prefills, 1, 'one prefill for the whole burst');
  t.equal(b.stats.largestBatch, 12);
  const longest = Math.max(...results.map((r) => r.tokens.length));
  t.equal(
    b.stats.steps,
    longest - 1,
    'steps run until the longest row stops (its first token comes from prefill)',
  );
  await equalsAlone(t, cached, reqs, results);
  await b.close();
});

t.test('the token budget bounds each iteration; a prompt over it still runs alone', async (t) => {
  const { cached } = await backends(t);
  const b = batcher(cached, { maxBatchTokens: 10 });
  const reqs = Array.from({ length: 10 }, (_, i) => request(i));
  const results = await Promise.all(reqs.map((r) => b.generate(r)));
  t.ok(b.stats.largestIterationTokens <= 10, `largest iteration ${b.stats.largestIterationTokens} tokens`);
  t.ok(b.stats.prefills > 1, `${b.stats.prefills} prefills: the queue was admitted in parts`);
  await equalsAlone(t, cached, reqs, results);
  const long: GenerateRequest = {
    prompt: Array.from({ length: 14 }, (_, k) => k % 13),
    maxNewTokens: 3,
    seed: 1,
  };
  const [alone] = await decodeBatch(cached, [long]);
  t.same((await b.generate(long)).tokens, alone.tokens);
  await b.close();
});

t.test('new parameters: running rows finish on theirs, later requests run the new ones', async (t) => {
  const { cached } = await backends(t);
  const b = batcher(cached);
  const req: GenerateRequest = { prompt: [1, 2, 3], maxNewTokens: 12, seed: 5, temperature: 0 };
  const [before] = await decodeBatch(cached, [req]);
  const running = b.generate(req);
  await new Promise((r) => setImmediate(r)); // the batch is now between steps
  cached.setParams(tinyParams(99));
  const later = b.generate({ ...req, seed: 6 });
  t.same((await running).tokens, before.tokens, 'the running row kept its parameters');
  const [fresh] = await decodeBatch(cached, [{ ...req, seed: 6 }]);
  const got = await later;
  t.same(got.tokens, fresh.tokens);
  t.same(got.policyLogprobs, fresh.policyLogprobs, 'the later request ran the new parameters');
  t.notSame(fresh.policyLogprobs, before.policyLogprobs);
  cached.setParams(params);
  await b.close();
});

t.test('a bad request fails alone; a failing forward fails its rows only; closed rejects', async (t) => {
  const { cached } = await backends(t);
  const b = batcher(cached);
  await t.rejects(b.generate({ prompt: [99], maxNewTokens: 2, seed: 1 }), /outside the vocabulary/);
  const nan = tinyParams(3);
  nan.get('ln_f.bias')!.fill(Number.NaN);
  cached.setParams(nan);
  await t.rejects(b.generate(request(1)), /NaN/);
  cached.setParams(params);
  const [alone] = await decodeBatch(cached, [request(2)]);
  t.same((await b.generate(request(2))).tokens, alone.tokens, 'the decoder keeps serving');
  await b.close();
  await t.rejects(b.generate(request(3)), DecoderClosedError);
});

t.test('rows that leave are filled from the end; prefill groups bound the padding', async (t) => {
  t.same(survivors([false, true, false, true, true]), [4, 1, 3], 'two holes, two rows moved');
  t.same(survivors([true, false, false]), [0]);
  t.same(survivors([false, false]), []);
  t.same(survivors([true, true]), [0, 1]);
  // Lengths 3, 10, 2, 9, 2: the 2s share a forward (4 slots, 4 tokens); adding the 3 would pad 7
  // tokens to 9 (over a quarter), so it goes alone; 9 and 10 share one (20 slots for 19 tokens).
  t.same(lengthGroups([[1, 1, 1], Array(10).fill(1), [1, 1], Array(9).fill(1), [1, 1]]), [
    [2, 4],
    [0],
    [3, 1],
  ]);
});
