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
import { rejectedFor, rejectedSeed } from '../src/rl/dpo.js';
import type { BoundaryLabel, QuestionGroup } from '../src/rl/types.js';
import { group, rollout } from './helpers/rollouts.js';

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

// The tie-break picks below, worked from src/util/rng.ts: pick over 2 ties is int(2), and int(2)
// never rejects a draw (2^32 % 2 = 0), so it is the parity of the Rng's first u32. At runSeed 7,
// step 0: rejectedSeed('o') = 2463794425, first u32 2196378136 (even: 0, the first in order);
// rejectedSeed('d') = 3614729992, first u32 2632048036 (even: 0); rejectedSeed('r') = 2351050645,
// first u32 168260820 (even: 0); rejectedSeed('q') = 229830345, first u32 394325575 (odd: 1, the
// second). The seeds are pinned here so that a change to them shows as such, not as a wrong pick.
t.test('the tie-break seeds the picks below are worked from', async (t) => {
  t.same(
    ['o', 'd', 'r', 'q'].map((q) => rejectedSeed(7, 0, q)),
    [2463794425, 3614729992, 2351050645, 229830345],
  );
});

t.test('a no-tool target makes 0 calls: every with-tool rollout that calls is costlier', async (t) => {
  // Efficiency: e.nt0 is the target, e.wt0 (correct, 2 calls) and e.wt1 (correct, 1) both make
  // more calls than 0, so both are candidates and e.wt0 has the most. Taking the calls of a
  // with-tool rollout for the no-tool target (e.g. the first, e.wt0's 2) would leave none.
  const g = group('e', [1, 1], [1], { wtCalls: [2, 1] });
  const l = labelOf(g);
  t.equal(l.category, 'efficiency');
  t.equal(l.target!.rolloutId, 'e.nt0');
  t.equal(rejectedFor(g, l, opts), 'e.wt0');
});

t.test("a with-tool target's own calls are the bar, not the first rollout's", async (t) => {
  // Target q.wt1 (the only correct 1-call rollout). q.wt0 is wrong with 3 calls, q.wt2 correct with
  // 3 (costlier than 1): a 2-way tie at 3, and seed 'q' picks the second in index order, q.wt2.
  // With q.wt0's 3 calls as the bar, q.wt2 would be no candidate and q.wt0 the answer.
  const g = group('q', [0, 1, 1], [0], { wtCalls: [3, 1, 3] });
  const l = labelOf(g);
  t.equal(l.target!.rolloutId, 'q.wt1');
  t.equal(rejectedFor(g, l, opts), 'q.wt2');
});

t.test('a correct rollout with more calls than the target is a candidate, and can be the pick', async (t) => {
  // Target c.wt0 (correct, 1 call); c.wt1 correct with 3 calls, c.wt2 wrong with 2: c.wt1 has the
  // most (3), although it is correct ("inefficient").
  const g = group('c', [1, 1, 0], [0], { wtCalls: [1, 3, 2] });
  t.equal(rejectedFor(g, labelOf(g), opts), 'c.wt1');
});

t.test('the target is excluded by its id, whatever its reward', async (t) => {
  // A label naming x.wt0 (wrong, 3 calls) as the target, as a hand-written label or one recorded
  // for rewards the group no longer has could: the pair must not be (x.wt0, x.wt0), so the answer
  // is the other wrong rollout, x.wt1 (1 call). With labelBoundary's labels the target is always
  // correct with exactly the chosen calls, and the reward test alone already excludes it.
  const g = group('x', [0, 0], [0], { wtCalls: [3, 1] });
  const label: BoundaryLabel = {
    questionId: 'x',
    wt: false,
    nt: false,
    category: 'both-wrong',
    target: { rolloutId: 'x.wt0', path: 'with-tool', context: 'with-tool', candidates: 1 },
    tieBreakSeed: 0,
  };
  t.equal(rejectedFor(g, label, opts), 'x.wt1');
});

t.test('ties are ordered by group index, not by arrival order', async (t) => {
  // o.wt1 and o.wt2 are wrong with 3 calls each (target o.wt0, correct, 1 call), the group lists
  // them as they finished: o.wt2 first. In index order the ties are [o.wt1, o.wt2] and seed 'o'
  // picks the first: o.wt1 (in arrival order it would be o.wt2).
  const g = group('o', [1, 0, 0], [0], { wtCalls: [1, 3, 3] });
  g.withTool.reverse(); // [o.wt2, o.wt1, o.wt0]
  t.equal(rejectedFor(g, labelOf(g), opts), 'o.wt1');
});

t.test("index order is numeric: index 2 before index 10 (the ids' text order is the reverse)", async (t) => {
  // d.wt2 and d.wt10 are wrong with 3 calls each (target d.wt0, correct, 1 call). By index the
  // ties are [d.wt2, d.wt10] and seed 'd' picks the first, d.wt2; by id text 'd.wt10' < 'd.wt2'.
  const g: QuestionGroup = {
    ...group('d', [1], [0], { wtCalls: [1] }),
    withTool: [
      rollout({ q: 'd', index: 0, reward: 1, toolCalls: 1 }),
      rollout({ q: 'd', index: 2, reward: 0, toolCalls: 3 }),
      rollout({ q: 'd', index: 10, reward: 0, toolCalls: 3 }),
    ],
  };
  t.equal(rejectedFor(g, labelOf(g), opts), 'd.wt2');
});

t.test('an index tie is broken by id, whichever arrived first', async (t) => {
  // Two wrong 3-call rollouts share index 1 (target r.wt0, correct, 1 call); by id r.a1 < r.b1,
  // and seed 'r' picks the first: r.a1 in both arrival orders.
  const tied = (id: string) => ({ ...rollout({ q: 'r', index: 1, reward: 0, toolCalls: 3 }), rolloutId: id });
  const target = rollout({ q: 'r', index: 0, reward: 1, toolCalls: 1 });
  const base = group('r', [1], [0], { wtCalls: [1] });
  const label = labelOf(base);
  t.equal(label.target!.rolloutId, 'r.wt0');
  for (const order of [
    ['r.a1', 'r.b1'],
    ['r.b1', 'r.a1'],
  ]) {
    const g = { ...base, withTool: [target, ...order.map(tied)] };
    t.equal(rejectedFor(g, label, opts), 'r.a1', `arrival order ${order.join(', ')}`);
  }
});

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
