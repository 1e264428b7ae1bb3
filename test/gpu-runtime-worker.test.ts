import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadCheckpoint } from '../src/gpu/checkpoint.js';
import { PolicyClosedError, PolicyHost } from '../src/gpu/policy-host.js';
import { refLogprobs, refNextLogprobs } from './helpers/ref-gpt.js';
import { TINY_CFG, tinyParams } from './helpers/tiny-policy.js';

const cfg = TINY_CFG;
const params = tinyParams(11);

/** Counts setInterval ticks and the longest gap between them while `work` runs. */
async function ticksDuring<T>(
  work: () => Promise<T>,
): Promise<{ value: T; ticks: number; maxGapMs: number; ms: number }> {
  let ticks = 0;
  let last = performance.now();
  let maxGapMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
    ticks++;
  }, 5);
  const t0 = performance.now();
  const value = await work();
  const ms = performance.now() - t0;
  clearInterval(timer);
  return { value, ticks, maxGapMs: Math.max(maxGapMs, performance.now() - last), ms };
}

t.test('policy worker: the event loop keeps ticking while the worker is busy', async (t) => {
  await using host = await PolicyHost.start({
    config: cfg,
    params: Object.fromEntries(params),
    device: 'cpu',
    intraOpThreads: 1,
  });
  t.equal(host.device, 'cpu');
  const blocked = await ticksDuring(() => host.busyWorker(400));
  t.ok(blocked.ms >= 390, `worker was busy ${blocked.ms.toFixed(0)} ms`);
  t.ok(blocked.ticks >= 20, `${blocked.ticks} ticks`);
  t.ok(blocked.maxGapMs < 150, `longest gap ${blocked.maxGapMs.toFixed(0)} ms`);

  // A real decode: 40 concurrent requests batched in the worker.
  const reqs = Array.from({ length: 40 }, (_, i) => ({
    prompt: [i % 13, 3],
    maxNewTokens: 20,
    seed: i,
    temperature: 1,
  }));
  const decoding = await ticksDuring(() => Promise.all(reqs.map((r) => host.generate(r))));
  t.equal(decoding.value.length, 40);
  t.ok(decoding.value.every((r, i) => r.tokens.length <= reqs[i].maxNewTokens && r.tokens.length > 0));
  t.ok(
    decoding.maxGapMs < 150,
    `longest gap during decode ${decoding.maxGapMs.toFixed(0)} ms over ${decoding.ms.toFixed(0)} ms`,
  );
});

t.test('policy worker: generate, logprobs, trainStep, checkpoints and close', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-policy-worker-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = await PolicyHost.start({
    config: cfg,
    params: Object.fromEntries(params),
    device: 'cpu',
    intraOpThreads: 1,
    trainer: { hyper: { lr: 1e-2, lambda: 1 } },
  });

  const g = await host.generate({ prompt: [1, 2], maxNewTokens: 3, seed: 1, temperature: 0 });
  t.equal(g.tokens.length, 3, 'maxNewTokens 3: three tokens');
  t.equal(g.policyLogprobs.length, 3);
  const ctx = [1, 2];
  for (const tok of g.tokens) {
    const lp = refNextLogprobs(cfg, params, ctx);
    t.equal(tok, lp.indexOf(Math.max(...lp)));
    ctx.push(tok);
  }
  const seqs = [
    [1, 2, 3, 4, 5, 6, 7, 8],
    [8, 7, 6, 5, 4, 3, 2, 1],
  ];
  const lps = await host.logprobs(seqs);
  t.ok(refLogprobs(cfg, params, seqs[0]).every((v, k) => Math.abs(v - lps[0][k]) < 1e-4));
  await t.rejects(host.generate({ prompt: [], maxNewTokens: 1, seed: 0 }), { name: 'GenerateRequestError' });

  // NLL on two target sequences (AKBE rows only): the loss falls, and the policy changes.
  const batch = () => ({
    inputIds: BigInt64Array.from(seqs.flat(), BigInt),
    lossMask: new Float32Array(2 * 7).fill(1),
    oldLogprobs: Float32Array.from(lps.flat()),
    advantages: new Float32Array(2),
    pgWeight: new Float32Array(2),
    akbeWeight: new Float32Array(2).fill(1 / 14), // per-target: 1 / (2 targets * 7 tokens)
  });
  const first = await host.trainStep({ batch: batch() }, { transfer: true });
  let last = first;
  for (let i = 0; i < 7; i++) last = await host.trainStep({ batch: batch() });
  t.ok(
    last.akbeLoss < 0.7 * first.akbeLoss,
    `nll ${first.akbeLoss.toFixed(3)} -> ${last.akbeLoss.toFixed(3)}`,
  );
  t.equal(last.step, 8);
  const trained = await host.getParams();
  const after = await host.logprobs(seqs);
  const refAfter = refLogprobs(cfg, trained, seqs[0]);
  t.ok(
    refAfter.every((v, k) => Math.abs(v - after[0][k]) < 1e-3),
    'scoring uses the trained parameters',
  );

  await host.saveCheckpoint(join(dir, 'ckpt'));
  const saved = await loadCheckpoint(join(dir, 'ckpt'));
  t.equal(saved.optimizer?.step, 8, 'AdamW state saved with the checkpoint');
  t.same(
    Array.from(saved.params.get('wte.weight')!.subarray(0, 8)),
    Array.from(trained.get('wte.weight')!.subarray(0, 8)),
  );

  await host.setParams(params);
  const reset = await host.logprobs(seqs);
  t.ok(
    reset[0].every((v, k) => Math.abs(v - lps[0][k]) < 1e-5),
    'setParams installs the given policy',
  );
  await host.loadCheckpoint(join(dir, 'ckpt'));
  const reloaded = await host.logprobs(seqs);
  t.ok(
    reloaded[0].every((v, k) => Math.abs(v - after[0][k]) < 1e-5),
    'loadCheckpoint restores it',
  );

  const info = await host.info();
  t.equal(info.parameters > 0 && info.device, 'cpu');
  await host.close();
  await t.rejects(host.generate({ prompt: [1], maxNewTokens: 1, seed: 0 }), PolicyClosedError);
});

t.test('policy worker: a bad checkpoint fails start with its one-line error', async (t) => {
  await t.rejects(
    PolicyHost.start({ checkpoint: '/nonexistent/ckpt' }),
    /\/nonexistent\/ckpt\/config\.json: missing/,
  );
});
