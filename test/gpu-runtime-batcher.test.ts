import t from 'tap';
import { Batcher, BatcherClosedError } from '../src/gpu/batcher.js';
import type { GenerateRequest, GenerateResult } from '../src/gpu/decoder.js';

/** A decode function whose answer depends only on the request: tokens = prompt reversed, then seed. */
function echoDecode(batches: number[]) {
  return async (reqs: GenerateRequest[]): Promise<GenerateResult[]> => {
    batches.push(reqs.length);
    await new Promise((r) => setTimeout(r, 5)); // a decode takes a while; requests keep arriving
    return reqs.map((r) => ({
      tokens: [...r.prompt].reverse().concat(r.seed),
      logprobs: [],
      policyLogprobs: [],
      finishReason: 'length' as const,
    }));
  };
}

t.test('50 concurrent requests are served in a few batches, each reply its own', async (t) => {
  const sizes: number[] = [];
  const b = new Batcher(echoDecode(sizes), { maxBatch: 16, windowMs: 3 });
  const reqs = Array.from({ length: 50 }, (_, i) => ({
    prompt: [i, i + 1],
    maxNewTokens: 1 + (i % 7),
    seed: 1000 + i,
  }));
  const replies = await Promise.all(reqs.map((r) => b.generate(r)));
  for (const [i, rep] of replies.entries()) t.same(rep.tokens, [i + 1, i, 1000 + i]);
  t.same(sizes, [16, 16, 16, 2], 'full batches go at once, the rest after the window');
  t.equal(b.stats.requests, 50);
  t.equal(b.stats.largestBatch, 16);
  await b.close();
});

t.test('a lone request waits only the window', async (t) => {
  const sizes: number[] = [];
  const b = new Batcher(echoDecode(sizes), { maxBatch: 64, windowMs: 2 });
  const t0 = performance.now();
  await b.generate({ prompt: [1], maxNewTokens: 1, seed: 1 });
  t.ok(performance.now() - t0 < 200);
  t.same(sizes, [1]);
  await b.close();
});

t.test('requests arriving during a decode form the next batch', async (t) => {
  const sizes: number[] = [];
  const b = new Batcher(echoDecode(sizes), { maxBatch: 8, windowMs: 1 });
  const first = b.generate({ prompt: [1], maxNewTokens: 1, seed: 1 });
  await new Promise((r) => setTimeout(r, 3)); // first batch is now running
  const later = Array.from({ length: 5 }, (_, i) => b.generate({ prompt: [i], maxNewTokens: 1, seed: i }));
  await Promise.all([first, ...later]);
  t.same(sizes, [1, 5]);
  await b.close();
});

t.test('a bad request fails alone; a failing decode rejects its batch; closed batcher rejects', async (t) => {
  const b = new Batcher(
    async (reqs) => {
      if (reqs.some((r) => r.seed === 13)) throw new Error('decode failed');
      return reqs.map(() => ({
        tokens: [],
        logprobs: [],
        policyLogprobs: [],
        finishReason: 'length' as const,
      }));
    },
    {
      maxBatch: 4,
      windowMs: 1,
      validate: (r) => {
        if (r.prompt.length === 0) throw new Error('empty prompt');
      },
    },
  );
  await t.rejects(b.generate({ prompt: [], maxNewTokens: 1, seed: 1 }), /empty prompt/);
  const ok = await b.generate({ prompt: [1], maxNewTokens: 1, seed: 1 });
  t.equal(ok.finishReason, 'length');
  await t.rejects(b.generate({ prompt: [1], maxNewTokens: 1, seed: 13 }), /decode failed/);
  await b.close();
  await t.rejects(b.generate({ prompt: [1], maxNewTokens: 1, seed: 1 }), BatcherClosedError);
});
