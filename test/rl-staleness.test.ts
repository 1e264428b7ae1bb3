/**
 * Bounded staleness's version arithmetic (src/rl/staleness.ts), worked by hand: step j rolls out
 * on version base + max(0, j - η) and trains from base + j. It lives in the rl scope (test/rl-*)
 * so that Stryker's rl run reaches it; the run machine's use of it is machines-staleness.
 */
import t from 'tap';
import { rolloutVersionOf, trainVersionOf } from '../src/rl/staleness.js';

t.test('rolloutVersionOf: j - η, never below the first version', async (t) => {
  t.same(
    [0, 1, 2, 3, 4].map((j) => rolloutVersionOf(j, 0)),
    [0, 1, 2, 3, 4],
    'η 0: step j rolls out on v_j (the synchronous loop)',
  );
  t.same(
    [0, 1, 2, 3, 4].map((j) => rolloutVersionOf(j, 1)),
    [0, 0, 1, 2, 3],
  );
  t.same(
    [0, 1, 2, 3, 4].map((j) => rolloutVersionOf(j, 2)),
    [0, 0, 0, 1, 2],
  );
  t.equal(rolloutVersionOf(5, 1, 10), 14, 'offset by the base version: 10 + (5 - 1)');
  t.equal(rolloutVersionOf(1, 2, 10), 10, 'clamped at the base, not at 0: 10 + max(0, 1 - 2)');
});

t.test('trainVersionOf: base + j; the gap to the rollout version is min(j, η)', async (t) => {
  t.equal(trainVersionOf(0), 0);
  t.equal(trainVersionOf(3), 3);
  t.equal(trainVersionOf(3, 10), 13);
  // Step 3 at η 1 trains from v3 on rows of v2; step 1 at η 2 from v1 on rows of v0.
  t.equal(trainVersionOf(3) - rolloutVersionOf(3, 1), 1);
  t.equal(trainVersionOf(1, 10) - rolloutVersionOf(1, 2, 10), 1);
});
