import t from 'tap';
import { labelBoundary, targetSeed } from '../src/rl/boundary.js';
import { deriveSeed } from '../src/util/rng.js';
import { rollout } from './helpers/rollouts.js';

const wt = (index: number, reward: number, toolCalls = 1, layout = 'ggg') =>
  rollout({ index, reward, toolCalls, layout });
const nt = (index: number, reward: number) => rollout({ index, reward, path: 'no-tool' });
const opts = { runSeed: 11, step: 3 };

t.test(
  'tool-dependent: WT and not NT; target the correct with-tool rollout with fewest tool calls',
  async (t) => {
    const l = labelBoundary([wt(0, 1, 3), wt(1, 0, 0), wt(2, 1, 1), wt(3, 1, 2)], [nt(0, 0), nt(1, 0)], opts);
    t.same([l.wt, l.nt, l.category], [true, false, 'tool-dependent']);
    t.same(l.target, { rolloutId: 'q1.wt2', path: 'with-tool', context: 'with-tool', candidates: 1 });
    t.equal(l.tieBreakSeed, deriveSeed(11, 'target', 3, 'q1'));
  },
);

t.test(
  'tool-dependent with `shortest` picks the fewest generated tokens, observations not counted',
  async (t) => {
    const l = labelBoundary(
      [wt(0, 1, 1, 'ggoooooog'), wt(1, 1, 2, 'ggggg'), wt(2, 1, 1, 'gggggg')],
      [nt(0, 0)],
      { ...opts, targetSelection: 'shortest' },
    );
    t.equal(l.target?.rolloutId, 'q1.wt0'); // 3 generated tokens (6 observation tokens ignored)
  },
);

t.test(
  'efficiency: WT and NT; target a correct no-tool rollout, re-conditioned on the with-tool prompt by default',
  async (t) => {
    const l = labelBoundary([wt(0, 1), wt(1, 0)], [nt(0, 0), nt(1, 1), nt(2, 0)], opts);
    t.same([l.wt, l.nt, l.category], [true, true, 'efficiency']);
    t.same(l.target, { rolloutId: 'q1.nt1', path: 'no-tool', context: 'with-tool', candidates: 1 });
    const own = labelBoundary([wt(0, 1)], [nt(0, 1)], { ...opts, targetContext: 'own' });
    t.equal(own.target?.context, 'no-tool');
  },
);

t.test('hallucination: not WT but NT; target a correct no-tool rollout', async (t) => {
  const l = labelBoundary([wt(0, 0), wt(1, 0)], [nt(0, 0), nt(1, 0), nt(2, 1)], opts);
  t.same([l.wt, l.nt, l.category], [false, true, 'hallucination']);
  t.same(l.target, { rolloutId: 'q1.nt2', path: 'no-tool', context: 'with-tool', candidates: 1 });
});

t.test('both-wrong: no target', async (t) => {
  const l = labelBoundary([wt(0, 0)], [nt(0, 0)], opts);
  t.same([l.wt, l.nt, l.category, l.target], [false, false, 'both-wrong', null]);
});

t.test('a format failure is not correct even with the right answer (reward decides)', async (t) => {
  const r = wt(0, 0);
  r.em = 1; // a right answer in a malformed trajectory has reward 0
  t.equal(labelBoundary([r], [nt(0, 0)], opts).category, 'both-wrong');
});

t.test('ties: a fixed seed gives the same pick whatever the rollout order', async (t) => {
  const rs = [wt(0, 1, 1), wt(1, 1, 2), wt(2, 1, 1), wt(3, 1, 1)];
  const a = labelBoundary(rs, [nt(0, 0)], opts);
  const b = labelBoundary([...rs].reverse(), [nt(0, 0)], opts);
  t.equal(a.target?.candidates, 3);
  t.equal(a.target?.rolloutId, b.target?.rolloutId);
  t.equal(a.tieBreakSeed, targetSeed(11, 3, 'q1'));
  t.not(a.target?.rolloutId, 'q1.wt1', 'never a candidate with more tool calls');
});

t.test('ties: the pick is uniform over the tied candidates across seeds', async (t) => {
  const rs = [wt(0, 1, 1), wt(1, 1, 1), wt(2, 1, 1), wt(3, 1, 4)];
  const counts = new Map<string, number>();
  const N = 3000;
  for (let seed = 0; seed < N; seed++) {
    const id = labelBoundary(rs, [], { runSeed: seed, step: 0 }).target!.rolloutId;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  t.same([...counts.keys()].sort(), ['q1.wt0', 'q1.wt1', 'q1.wt2']);
  // Each of 3 ties expects 1000 ± 26 (binomial sd); 5 sd bounds.
  for (const c of counts.values()) t.ok(Math.abs(c - N / 3) < 130, `count ${c} near ${N / 3}`);
  const nts = [nt(0, 1), nt(1, 1)];
  let first = 0;
  for (let seed = 0; seed < N; seed++)
    if (labelBoundary([wt(0, 1)], nts, { runSeed: seed, step: 1 }).target!.rolloutId === 'q1.nt0') first++;
  t.ok(Math.abs(first - N / 2) < 140, `no-tool pick ${first} near ${N / 2}`);
});

t.test('rollouts of another question are rejected', async (t) => {
  t.throws(() => labelBoundary([wt(0, 1), rollout({ q: 'q2', index: 1, reward: 1 })], [], opts), {
    name: 'RolloutShapeError',
  });
  t.throws(() => labelBoundary([], [], opts), { name: 'RolloutShapeError' });
});
