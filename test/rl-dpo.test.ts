/**
 * dpo-akbe's rejected pick (src/rl/dpo.ts), worked by hand: among the with-tool rollouts other
 * than the target that are wrong or make more calls than it, the one with the most calls (TC's
 * count: a refused call past the limit counts), ties by the seeded rng; no pair without a target
 * or without such a rollout. Then the learner's whole step (prepareStep) for dpo-akbe: pairs in the
 * batch, no L_AKBE weights, and the loss terms GRPO + lambda * DPO with beta from algoOptions.
 */
import t from 'tap';
import { prepareStep } from '../src/machines/learner.js';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import { labelBoundary } from '../src/rl/boundary.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';
import { rejectedFor } from '../src/rl/dpo.js';
import type { QuestionGroup } from '../src/rl/types.js';
import { group } from './helpers/rollouts.js';

const opts = { runSeed: 7, step: 0 };
const labelOf = (g: QuestionGroup) => labelBoundary(g.withTool, g.noTool, opts);

t.test('tool-dependent: the most calls among the wrong or costlier rollouts', async (t) => {
  // Target q.wt0 (correct, 1 call). q.wt2 is correct with 2 calls (costlier: a candidate),
  // q.wt1 wrong with 4: the most. q.wt3 correct with 1 call is no candidate.
  const g = group('q', [1, 0, 1, 1], [0, 0], { wtCalls: [1, 4, 2, 1] });
  const l = labelOf(g);
  t.equal(l.category, 'tool-dependent');
  t.ok(['q.wt0', 'q.wt3'].includes(l.target!.rolloutId));
  t.equal(rejectedFor(g, l, opts), 'q.wt1');
  // Only correct rollouts with no more calls than the target: no pair.
  const even = group('e', [1, 1, 0], [0], { wtCalls: [1, 1, 1] });
  even.withTool[2].reward = 1;
  t.equal(rejectedFor(even, labelOf(even), opts), null);
  // A wrong rollout with fewer calls than the target is still a candidate (incorrect).
  const wrong = group('w', [1, 0], [0], { wtCalls: [2, 0] });
  t.equal(rejectedFor(wrong, labelOf(wrong), opts), 'w.wt1');
});

t.test('a refused call past the limit counts, as TC counts it', async (t) => {
  const g = group('q', [1, 0, 0], [0], { wtCalls: [1, 2, 2] });
  g.withTool[2].stopReason = 'tool-limit'; // 2 executed + the refused one = 3
  const l = labelOf(g);
  t.equal(rejectedFor(g, l, opts), 'q.wt2');
  t.equal(rejectedFor(g, l, { ...opts, toolCallCount: 'executed' }) !== null, true);
});

t.test('efficiency / hallucination targets pair with the most-calls with-tool rollout', async (t) => {
  const g = group('h', [0, 0, 0], [1], { wtCalls: [1, 3, 2] });
  const l = labelOf(g);
  t.equal(l.category, 'hallucination');
  t.equal(rejectedFor(g, l, opts), 'h.wt1');
  // Efficiency: all with-tool correct with 0 calls: nothing is worse than the 0-call target.
  const e = group('f', [1, 1], [1], { wtCalls: [0, 0] });
  t.equal(labelOf(e).category, 'efficiency');
  t.equal(rejectedFor(e, labelOf(e), opts), null);
  const both = group('b', [0, 0], [0], { wtCalls: [1, 2] });
  t.equal(rejectedFor(both, labelOf(both), opts), null, 'both-wrong: no target, no pair');
});

t.test('ties: the seeded rng picks, the same for the same seed, both sides over seeds', async (t) => {
  const g = group('q', [1, 0, 0, 0], [0], { wtCalls: [1, 3, 3, 2] });
  const pick = (runSeed: number) =>
    rejectedFor(g, labelBoundary(g.withTool, g.noTool, { runSeed, step: 0 }), { runSeed, step: 0 });
  t.equal(pick(7), pick(7));
  // Known answers of the seeded stream (deriveSeed(runSeed, 'dpo-rejected', 0, 'q')).
  t.same([0, 1, 2, 3, 4, 5].map(pick), KNOWN);
  const seen = new Set(Array.from({ length: 20 }, (_, s) => pick(s)));
  t.same([...seen].sort(), ['q.wt1', 'q.wt2'], 'only the 3-call rollouts, each picked by some seed');
});

const KNOWN = ['q.wt2', 'q.wt1', 'q.wt1', 'q.wt2', 'q.wt1', 'q.wt1'];

t.test('prepareStep for dpo-akbe: pairs, no AKBE weights, GRPO + lambda * DPO(beta)', async (t) => {
  const groups = [
    group('a', [1, 0, 0], [0, 0], { wtCalls: [1, 2, 3] }),
    group('b', [0, 0, 0], [1, 0], { wtCalls: [1, 1, 2] }),
  ];
  const terms = lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, algo: 'dpo-akbe', algoOptions: { beta: 0.25 } });
  t.same(terms, [
    { name: 'grpo', options: { clipEps: 0.2 } },
    { name: 'dpo', options: { lambda: 0.05, beta: 0.25 } },
  ]);
  t.same(
    lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, algo: 'dpo-akbe' })[1].options.beta,
    0.1,
    "DPO's usual beta",
  );
  const p = prepareStep(
    {
      runSeed: 7,
      batchQuestions: 2,
      miniBatchQuestions: 2,
      algo: 'dpo-akbe',
      advantage: 'grpo',
      targetSelection: 'min-tool-calls',
      targetContext: 'with-tool',
      losses: terms,
      initialVersion: 0,
    },
    groups,
    {},
  );
  const ids = p.batch.rowInfo.map((r) => r.rolloutId);
  const pairs = (p.batch.dpoPairs ?? []).map((x) => [ids[x.chosen], ids[x.rejected], x.weight]);
  t.same(pairs.sort(), [
    ['a.wt0', 'a.wt2', 0.5],
    ['b.nt0', 'b.wt2', 0.5],
  ]);
  t.ok(p.batch.akbeWeight.every((w) => w === 0));
});
