import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadCheckpoint, saveCheckpoint } from '../src/gpu/checkpoint.js';
import { countParams } from '../src/gpu/config.js';
import { runCli } from './helpers/cli.js';
import { refLogprobs, refNextLogprobs } from './helpers/ref-gpt.js';
import { refSample } from './helpers/ref-sampler.js';
import { TINY_CFG, tinyParams } from './helpers/tiny-policy.js';

const dir = mkdtempSync(join(tmpdir(), 'akbe-policy-cli-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const ckpt = join(dir, 'ckpt');
const configFile = join(dir, 'gpt.json');
writeFileSync(configFile, JSON.stringify(TINY_CFG));

t.test('policy init writes a checkpoint and refuses to overwrite it without --force', async (t) => {
  const r = await runCli('policy', 'init', '--config', configFile, '--out', ckpt, '--seed', '4');
  t.equal(r.code, 0, r.err);
  t.match(r.out, new RegExp(`wrote .*ckpt \\(${countParams(TINY_CFG)} parameters, seed 4\\)`));
  const c = await loadCheckpoint(ckpt);
  t.same(c.config, TINY_CFG);
  const again = await runCli('policy', 'init', '--config', configFile, '--out', ckpt);
  t.equal(again.code, 1);
  t.match(again.err, /already holds a checkpoint; pass --force/);
  t.equal(
    (await runCli('policy', 'init', '--config', configFile, '--out', ckpt, '--force', '--seed', '4')).code,
    0,
  );

  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ ...TINY_CFG, n_head: 3 }));
  const b = await runCli('policy', 'init', '--config', bad, '--out', join(dir, 'x'));
  t.equal(b.code, 1);
  t.match(b.err, /bad\.json: config key 'n_head' must divide n_embd/);
  t.equal(b.err.trim().split('\n').length, 1);
});

t.test('policy logprobs equals a direct float64 computation of the same model', async (t) => {
  const params = tinyParams(9);
  await saveCheckpoint(ckpt, { config: TINY_CFG, params });
  const seqs = [[1, 2, 3, 4], [5], [12, 11, 10, 9, 8, 7, 6, 5, 4, 3]];
  const input = join(dir, 'seqs.json');
  writeFileSync(input, JSON.stringify({ sequences: seqs }));
  const r = await runCli('policy', 'logprobs', '--checkpoint', ckpt, '--input', input, '--threads', '1');
  t.equal(r.code, 0, r.err);
  const got = JSON.parse(r.out).logprobs as number[][];
  t.same(
    got.map((g) => g.length),
    [3, 0, 9],
  );
  for (const [i, s] of seqs.entries()) {
    const ref = refLogprobs(TINY_CFG, params, s);
    t.ok(
      ref.every((v, k) => Math.abs(v - got[i][k]) < 1e-4),
      `sequence ${i}`,
    );
  }
  writeFileSync(input, '{"sequences": [[1, 2], [3');
  const bad = await runCli('policy', 'logprobs', '--checkpoint', ckpt, '--input', input);
  t.equal(bad.code, 1);
  t.match(bad.err, /--input .*seqs\.json: bad JSON/);
});

t.test('policy sample: greedy continuation matches the reference; flags are checked', async (t) => {
  const params = tinyParams(9);
  const r = await runCli(
    'policy',
    'sample',
    '--checkpoint',
    ckpt,
    '--tokens',
    '1,2,3',
    '--max-new',
    '5',
    '--temperature',
    '0',
  );
  t.equal(r.code, 0, r.err);
  const res = JSON.parse(r.out);
  t.equal(res.tokens.length, 5, '--max-new 5: five tokens');
  t.equal(res.logprobs.length, 5);
  t.equal(res.policyLogprobs.length, 5);
  const ctx = [1, 2, 3];
  for (const tok of res.tokens) {
    const lp = refNextLogprobs(TINY_CFG, params, ctx);
    t.equal(tok, lp.indexOf(Math.max(...lp)));
    ctx.push(tok);
  }
  t.equal(res.finishReason, 'length');
  const seeded = await runCli(
    'policy',
    'sample',
    '--checkpoint',
    ckpt,
    '--tokens',
    '1',
    '--seed',
    '5',
    '--top-p',
    '0.9',
  );
  const again = await runCli(
    'policy',
    'sample',
    '--checkpoint',
    ckpt,
    '--tokens',
    '1',
    '--seed',
    '5',
    '--top-p',
    '0.9',
  );
  t.equal(seeded.out, again.out, 'same seed, same sample');
  t.equal(seeded.code, 0, seeded.err);
  // Default --max-new 20 and --temperature 1; the tokens are the independent sampler's.
  const ref = refSample(TINY_CFG, params, [1], { maxNew: 20, seed: 5, temperature: 1, topP: 0.9 });
  t.same(
    JSON.parse(seeded.out).tokens,
    ref.map((d) => d.token),
    'seed 5, top-p 0.9: the reference sample',
  );
  const hot = await runCli(
    'policy',
    'sample',
    '--checkpoint',
    ckpt,
    '--tokens',
    '4,2',
    '--seed',
    '11',
    '--temperature',
    '0.5',
    '--top-p',
    '0.7',
    '--max-new',
    '7',
  );
  t.equal(hot.code, 0, hot.err);
  t.same(
    JSON.parse(hot.out).tokens,
    refSample(TINY_CFG, params, [4, 2], { maxNew: 7, seed: 11, temperature: 0.5, topP: 0.7 }).map(
      (d) => d.token,
    ),
    'seed 11, temperature 0.5, top-p 0.7, --max-new 7: the reference sample',
  );
  const bad = await runCli('policy', 'sample', '--checkpoint', ckpt, '--tokens', '1,x');
  t.equal(bad.code, 2);
  t.match(bad.err, /--tokens must be comma-separated token ids/);
  const oov = await runCli('policy', 'sample', '--checkpoint', ckpt, '--tokens', '99');
  t.equal(oov.code, 1);
  t.match(oov.err, /token id 99 is outside the vocabulary/);
});

t.test(
  'policy info reports parameters, device and nodes per provider; an unavailable device is one line',
  async (t) => {
    const r = await runCli('policy', 'info', '--checkpoint', ckpt);
    t.equal(r.code, 0, r.err);
    t.match(r.out, new RegExp(`parameters: ${countParams(TINY_CFG)}`));
    t.match(r.out, /device: cpu/);
    t.match(r.out, /nodes per provider \(decode-prefill graph\): CPUExecutionProvider \d+/);
    t.match(r.out, /nodes per provider \(decode-step graph\): CPUExecutionProvider \d+/);
    t.match(r.out, /nodes per provider \(score graph\): CPUExecutionProvider \d+/);
    const missing = await runCli('policy', 'info', '--checkpoint', join(dir, 'nope'));
    t.equal(missing.code, 1);
    t.match(missing.err, /nope\/config\.json: missing/);
    const dev = await runCli('policy', 'info', '--checkpoint', ckpt, '--device', 'tpu');
    t.equal(dev.code, 2);
    t.match(dev.err, /--device must be one of cpu\|webgpu\|cuda\|auto/);
  },
);
