/**
 * The registered algorithms' option checks, loss terms and reward shapings at their boundaries,
 * with hand-worked values (issue 16: mutation testing left otc-po's and beta-grpo's option checks
 * and several reward branches untested). rl-algorithms.test.ts holds the main known answers.
 */
import t from 'tap';
import { searchCallConfidences } from '../src/rl/algorithms/beta-grpo.js';
import { algorithmOptions, getAlgorithm, lossTermsFor } from '../src/rl/algorithms/index.js';
import { otcToolReward } from '../src/rl/algorithms/otc-po.js';
import { rollout } from './helpers/rollouts.js';

const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;
const loss = { akbeLossForm: 'nll' as const, lambda: 0.1, clipEps: 0.3 };

t.test('algorithmOptions: defaults overlaid, unknown keys and non-numbers named', async (t) => {
  t.strictSame(algorithmOptions(getAlgorithm('otc-po')), { alpha: 1, c: 6 });
  t.strictSame(algorithmOptions(getAlgorithm('otc-po'), { alpha: 2 }), { alpha: 2, c: 6 });
  t.strictSame(algorithmOptions(getAlgorithm('beta-grpo')), { beta: 0.4 });
  t.strictSame(algorithmOptions(getAlgorithm('akbe')), {});
  t.throws(() => algorithmOptions(getAlgorithm('grpo'), { beta: 1 }), {
    name: 'ConfigError',
    message: "config.algoOptions.beta is not an option of algo 'grpo'; its options: none",
  });
  t.throws(() => algorithmOptions(getAlgorithm('otc-po'), { c: '6' }), {
    name: 'ConfigError',
    message: 'config.algoOptions.c must be a number, got "6"',
  });
  t.throws(() => algorithmOptions(getAlgorithm('otc-po'), { c: Number.NaN }), {
    message: 'config.algoOptions.c must be a number, got null',
  });
  t.throws(() => algorithmOptions(getAlgorithm('otc-po'), { alpha: Infinity }), {
    message: 'config.algoOptions.alpha must be a number, got null',
  });
});

t.test('otc-po options: alpha > 0 and c > 0, the bound itself refused', async (t) => {
  const otc = getAlgorithm('otc-po');
  t.throws(() => algorithmOptions(otc, { alpha: 0 }), {
    name: 'ConfigError',
    message: 'config.algoOptions: alpha must be > 0, got 0',
  });
  t.throws(() => algorithmOptions(otc, { alpha: -1 }), {
    message: 'config.algoOptions: alpha must be > 0, got -1',
  });
  t.throws(() => algorithmOptions(otc, { c: 0 }), { message: 'config.algoOptions: c must be > 0, got 0' });
  t.throws(() => algorithmOptions(otc, { c: -2 }), { message: 'config.algoOptions: c must be > 0, got -2' });
  t.strictSame(
    algorithmOptions(otc, { alpha: 1e-9, c: 1e-9 }),
    { alpha: 1e-9, c: 1e-9 },
    'just above 0 is fine',
  );
  t.throws(() => otc.validateOptions!({ alpha: Number.NaN, c: 6 }), { name: 'RangeError', message: /alpha/ });
  t.throws(() => otc.validateOptions!({ alpha: 1, c: Number.NaN }), {
    name: 'RangeError',
    message: /^c must/,
  });
});

t.test('beta-grpo options: beta in [0, 1], both ends allowed', async (t) => {
  const beta = getAlgorithm('beta-grpo');
  t.strictSame(algorithmOptions(beta, { beta: 0 }), { beta: 0 });
  t.strictSame(algorithmOptions(beta, { beta: 1 }), { beta: 1 });
  t.throws(() => algorithmOptions(beta, { beta: -0.01 }), {
    name: 'ConfigError',
    message: 'config.algoOptions: beta must be in [0, 1], got -0.01',
  });
  t.throws(() => algorithmOptions(beta, { beta: 1.01 }), {
    message: 'config.algoOptions: beta must be in [0, 1], got 1.01',
  });
  t.throws(() => beta.validateOptions!({ beta: Number.NaN }), { name: 'RangeError' });
});

t.test('loss terms: GRPO with the config clip for the shaping baselines; AKBE adds its form', async (t) => {
  for (const algo of ['grpo', 'otc-po', 'beta-grpo'])
    t.strictSame(lossTermsFor({ ...loss, algo }), [{ name: 'grpo', options: { clipEps: 0.3 } }], algo);
  t.strictSame(lossTermsFor({ ...loss, algo: 'akbe' }), [
    { name: 'grpo', options: { clipEps: 0.3 } },
    { name: 'akbe-nll', options: { lambda: 0.1 } },
  ]);
  t.strictSame(
    lossTermsFor({ ...loss, algo: 'akbe', akbeLossForm: 'clipped', lambda: 'auto', gWithTool: 8 }),
    [
      { name: 'grpo', options: { clipEps: 0.3 } },
      { name: 'akbe-clipped', options: { lambda: 0.1, clipEps: 0.3 } },
    ],
    "lambda 'auto' = 0.8 / G_wt",
  );
});

t.test('otcToolReward: both branches, by hand', async (t) => {
  t.equal(otcToolReward(0, 0, 6), 1, 'm = n = 0');
  t.ok(close(otcToolReward(1, 0, 6), Math.cos(Math.PI / 8)), 'cos(pi / (2 + 6))');
  t.ok(close(otcToolReward(3, 0, 2), Math.cos((3 * Math.PI) / 8)), 'cos(3 pi / (6 + 2)): c matters');
  t.ok(close(otcToolReward(1, 2, 6), Math.sqrt(3) / 2), 'f(1, 2) = 4/3: sin((4/3) pi / 4) = sin(pi / 3)');
  t.equal(otcToolReward(0, 2, 6), 0, 'f(0, 2) = 0: no call when two were optimal scores 0');
  t.ok(close(otcToolReward(2, 2, 6), 1), 'm = n');
  t.ok(close(otcToolReward(6, 2, 6), Math.SQRT1_2), 'f(6, 2) = 3: sin(3 pi / 4)');
});

const withCalls = (reward: number, toolCalls: number, index: number, stopReason = 'answer') => ({
  ...rollout({ index, reward, toolCalls }),
  stopReason: stopReason as 'answer',
});

t.test(
  'otc-po rewards: n from the correct rollouts only, partial rewards scaled, tool-limit counted',
  async (t) => {
    const otc = getAlgorithm('otc-po');
    // A wrong rollout with no call must not set n = 0: n = 2 from the correct ones.
    const r = otc.rewards([withCalls(0, 0, 0), withCalls(1, 2, 1), withCalls(0.5, 2, 2)], { alpha: 1, c: 6 });
    t.equal(r[0], 0);
    t.ok(close(r[1], 1), `m = n = 2: ${r[1]}`);
    t.ok(close(r[2], 0.5), `a reward of 0.5 at m = n stays 0.5: ${r[2]}`);
    // alpha and r_phi multiply; n = 1 (a reward of 0.5 is correct): f(2, 1) = 4/3, sin(2 pi / 3).
    const s = otc.rewards([withCalls(1, 2, 0), withCalls(0.5, 1, 1)], { alpha: 3, c: 6 });
    t.ok(close(s[0], (3 * Math.sqrt(3)) / 2), `3 * sin(2 pi / 3) * 1: ${s[0]}`);
    t.ok(close(s[1], 1.5), `3 * 1 * 0.5: ${s[1]}`);
    // A tool-limit stop counts the refused call (countedToolCalls 'emitted'): m = 2 + 1 = 3 > n = 2.
    const lim = otc.rewards([withCalls(1, 2, 0), withCalls(1, 2, 1, 'tool-limit')], { alpha: 1, c: 6 });
    t.ok(close(lim[0], 1));
    t.ok(close(lim[1], Math.sin(((12 / 5) * Math.PI) / 4)), `f(3, 2) = 12/5: ${lim[1]}`);
  },
);

/** Logprobs from probabilities on a mask: 1 = generated, 0 = observation. */
function masked(reward: number, mask: number[], probs: number[]) {
  const r = rollout({ index: 0, reward, layout: mask.map((m) => (m ? 'g' : 'o')).join('') });
  return { ...r, responseLogprobs: probs.map((p) => Math.log(p)) };
}

t.test('beta-grpo: call spans, the threshold itself, and partial rewards', async (t) => {
  const beta = getAlgorithm('beta-grpo');
  // Leading observation tokens, then a run of two observations: one call, min(0.6, 0.9) = 0.6.
  const a = masked(1, [0, 1, 1, 0, 0, 1], [1, 0.6, 0.9, 1, 1, 0.2]);
  const conf = searchCallConfidences(a);
  t.equal(conf.length, 1, 'one call: a generated run followed by observations; the last run is the answer');
  t.ok(close(conf[0], 0.6));
  t.strictSame(beta.rewards([a], { beta: conf[0] }), [1], 'a confidence equal to beta keeps the reward');
  t.strictSame(beta.rewards([a], { beta: 0.6000001 }), [0]);
  // Each call's minimum is its own (the running minimum restarts after an observation).
  const b = masked(1, [1, 0, 1, 1, 0], [0.3, 1, 0.8, 0.7, 1]);
  const cb = searchCallConfidences(b);
  t.equal(cb.length, 2);
  t.ok(close(cb[0], 0.3) && close(cb[1], 0.7), `[0.3, 0.7]: ${cb}`);
  t.strictSame(beta.rewards([{ ...b, reward: 0.5 }], { beta: 0.25 }), [0.5], 'the reward itself, not 1');
  t.strictSame(searchCallConfidences(masked(1, [0, 0], [1, 1])), [], 'observations only: no call');
});
