// The event catalog owns its vocabulary (src/events/payloads/vocabulary.ts) so that an edit in
// src/rl cannot change a stored shape without a new `v`. This test is the tripwire: when the two
// drift apart it fails, and whoever changed one decides whether the stored format changes too.
import t from 'tap';
import * as stored from '../src/events/payloads/vocabulary.js';
import * as rl from '../src/rl/types.js';

t.test('the stored vocabulary lists match the algorithm types word for word', async (t) => {
  t.same([...stored.ROLLOUT_PATHS], [...rl.ROLLOUT_PATHS]);
  t.same([...stored.STOP_REASONS], [...rl.STOP_REASONS]);
  t.same([...stored.TURN_ACTIONS], [...rl.TURN_ACTIONS]);
  t.same([...stored.BOUNDARY_CATEGORIES], [...rl.BOUNDARY_CATEGORIES]);
});

t.test('categoryOf: the paper table, hand-written, and both modules agree on all four cells', async (t) => {
  const table: [boolean, boolean, string][] = [
    [true, true, 'efficiency'],
    [true, false, 'tool-dependent'],
    [false, true, 'hallucination'],
    [false, false, 'both-wrong'],
  ];
  for (const [wt, nt, want] of table) {
    t.equal(stored.categoryOf(wt, nt), want, `stored WT=${wt} NT=${nt}`);
    t.equal(rl.categoryOf(wt, nt), want, `rl WT=${wt} NT=${nt}`);
  }
});
