/**
 * L_AKBE's aggregation, worked by hand: two targets of different lengths in one mini-batch, a
 * 4-token tool-dependent target (per-token NLL 1, 2, 3, 4: its mean 2.5) and a 1-token efficiency
 * target (NLL 6).
 *   per-target (the paper): (2.5 + 6) / 2 = 4.25;  row weights 1 / (2 * 4) and 1 / (2 * 1)
 *   pooled:                 (1 + 2 + 3 + 4 + 6) / 5 = 3.2;  row weights 1 / 5 each
 * The batch (src/rl/batch.ts) carries the weights, the loss graph (src/gpu/losses.ts) sums with
 * them; its gradient is checked against float64 central differences (test/helpers/gradcheck.ts).
 */
import t from 'tap';
import { policyLoss } from '../src/gpu/losses.js';
import { assembleBatch, type BatchQuestion } from '../src/rl/batch.js';
import type { AkbeAggregation } from '../src/rl/losses.js';
import type { BoundaryLabel } from '../src/rl/types.js';
import { gradcheck } from './helpers/gradcheck.js';
import { rollout } from './helpers/rollouts.js';

const f32 = (x: number) => Math.fround(x);

function target(q: string, rolloutId: string, path: 'with-tool' | 'no-tool'): BoundaryLabel {
  return {
    questionId: q,
    wt: true,
    nt: path === 'no-tool',
    category: path === 'no-tool' ? 'efficiency' : 'tool-dependent',
    target: { rolloutId, path, context: path, candidates: 1 },
    tieBreakSeed: 0,
  };
}

// a: with-tool target wt0 with 4 generated tokens around 2 observation tokens; b: no-tool target, 1 token.
const questions = (): BatchQuestion[] => [
  {
    group: {
      questionId: 'a',
      step: 0,
      policyVersion: 0,
      gold: ['x'],
      withToolPrompt: [1, 2],
      withTool: [
        rollout({ q: 'a', index: 0, reward: 1, layout: 'ggoogg', toolCalls: 1 }),
        rollout({ q: 'a', index: 1, reward: 0, layout: 'gg' }),
      ],
      noTool: [rollout({ q: 'a', index: 0, reward: 0, path: 'no-tool' })],
    },
    label: target('a', 'a.wt0', 'with-tool'),
    advantages: [0.7, -0.7],
  },
  {
    group: {
      questionId: 'b',
      step: 0,
      policyVersion: 0,
      gold: ['x'],
      withToolPrompt: [1, 2],
      withTool: [rollout({ q: 'b', index: 0, reward: 0 }), rollout({ q: 'b', index: 1, reward: 0 })],
      noTool: [rollout({ q: 'b', index: 0, reward: 1, path: 'no-tool', layout: 'g' })],
    },
    label: target('b', 'b.nt0', 'no-tool'),
    advantages: [0, 0],
  },
];

t.test('the batch carries per-target and pooled row weights worked by hand', async (t) => {
  const per = assembleBatch(questions(), { rowKinds: ['akbe-target'], miniBatchQuestions: 2 });
  t.same(
    per.rowInfo.map((r) => r.rolloutId),
    ['a.wt0', 'a.wt1', 'b.wt0', 'b.wt1', 'b.nt0'],
  );
  t.same(Array.from(per.akbeWeight), [f32(1 / 8), 0, 0, 0, f32(1 / 2)], 'default: per-target');
  const pooled = assembleBatch(questions(), {
    rowKinds: ['akbe-target'],
    miniBatchQuestions: 2,
    akbeAggregation: 'pooled',
  });
  t.same(Array.from(pooled.akbeWeight), [f32(1 / 5), 0, 0, 0, f32(1 / 5)]);
  // Weights are per mini-batch: with one question per mini-batch each target is alone in its own.
  const alone = assembleBatch(questions(), { rowKinds: ['akbe-target'], miniBatchQuestions: 1 });
  t.same(Array.from(alone.akbeWeight), [f32(1 / 4), 0, 0, 0, 1]);
  const grpo = assembleBatch(questions(), { rowKinds: [], miniBatchQuestions: 2 });
  t.same(Array.from(grpo.akbeWeight), [0, 0, 0, 0], 'GRPO alone has no target rows');
});

/** Two rows as the graph sees them: row 0 the 4-token target, row 1 the 1-token target (then padding). */
function rows(aggregation: AkbeAggregation) {
  const b = assembleBatch(questions(), {
    rowKinds: ['akbe-target'],
    miniBatchQuestions: 2,
    akbeAggregation: aggregation,
  });
  return { mask: [1, 1, 1, 1, 1, 0, 0, 0], akbeWeight: [b.akbeWeight[0], b.akbeWeight[4]] };
}

const HAND: Record<'nll' | 'clipped', Record<AkbeAggregation, number>> = {
  // NLL 1, 2, 3, 4 | 6 (see the top of the file).
  nll: { 'per-target': 4.25, pooled: 3.2 },
  // Ratios 1.1 on row 0 and 0.9 on row 1, inside the clip range: token loss -r.
  clipped: { 'per-target': (-1.1 - 0.9) / 2, pooled: (4 * -1.1 - 0.9) / 5 },
};

for (const form of ['nll', 'clipped'] as const) {
  for (const aggregation of ['per-target', 'pooled'] as const) {
    t.test(
      `L_AKBE ${form}, ${aggregation}: the hand-worked value, gradient = central differences`,
      async (t) => {
        const { mask, akbeWeight } = rows(aggregation);
        const logp = [-1, -2, -3, -4, -6, -0.5, -0.5, -0.5];
        const old = form === 'nll' ? logp : logp.map((lp, i) => lp - Math.log(i < 4 ? 1.1 : 0.9));
        const fixed = (values: number[], shape: number[]) => ({ values, shape, noGrad: true });
        const res = await gradcheck(t, {
          inputs: {
            logp: { shape: [2, 4], values: logp },
            old: fixed(old, [2, 4]),
            mask: fixed(mask, [2, 4]),
            adv: fixed([0, 0], [2]),
            pgw: fixed([0, 0], [2]),
            akw: fixed(akbeWeight, [2]),
            lo: fixed([0.2], []),
            hi: fixed([0.2], []),
            c: fixed([3], []),
            clamp: fixed([20], []),
            lambda: fixed([1], []),
          },
          build: (x) =>
            policyLoss(
              {
                tokenLogp: x.logp,
                oldLogp: x.old,
                lossMask: x.mask,
                advantages: x.adv,
                pgWeight: x.pgw,
                akbeWeight: x.akw,
              },
              { clipEpsLow: x.lo, clipEpsHigh: x.hi, dualClipC: x.c, ratioClamp: x.clamp, lambda: x.lambda },
              { akbeLoss: form },
            ).akbeLoss,
          expect: () => [HAND[form][aggregation]],
          atol: 1e-6, // the weights are float32 (the batch's Float32Array)
          rtol: 1e-7,
        });
        t.ok(res.errors.logp !== undefined, 'the gradient was checked');
      },
    );
  }
}
