/**
 * offline-akbe's labels, targets and batch rows (src/rl/offline.ts, src/rl/batch.ts 'offline',
 * prepareStep), worked by hand: the frozen rollouts are labelled once with the on-policy rule
 * (fewest calls among the correct with-tool ones; a correct no-tool one for efficiency /
 * hallucination, under the with-tool prompt or its own), each target is its own batch row outside
 * L_GRPO with pi_old recomputed, the on-policy labels' targets are not trained, and the L_AKBE
 * weights are the per-target / pooled ones over the frozen targets. The config key frozenPolicy is
 * required for offline-akbe and refused elsewhere.
 */
import t from 'tap';
import { runSpecOf } from '../src/actors/roles/roles.js';
import { prepareStep } from '../src/machines/learner.js';
import { getAlgorithm, lossTermsFor } from '../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG, validateTrainConfig } from '../src/rl/config.js';
import { frozenReward, type OfflineTarget, offlineLabel, offlineTargetOf } from '../src/rl/offline.js';
import type { RolloutResult } from '../src/rl/types.js';
import { group, rollout } from './helpers/rollouts.js';

const opts = {
  runSeed: 7,
  targetSelection: 'min-tool-calls' as const,
  targetContext: 'with-tool' as const,
  checkpointSha256: 'a'.repeat(64),
};

/** Frozen rollouts of question q: with-tool rewards/calls/layouts, no-tool rewards. */
function frozen(q: string, wt: Array<[number, number, string?]>, nt: number[]): RolloutResult[] {
  const rename = (r: RolloutResult) => ({ ...r, rolloutId: r.rolloutId.replace(`${q}.`, `frozen.${q}.`) });
  return [
    ...wt.map(([reward, toolCalls, layout], index) =>
      rename(rollout({ q, index, reward, toolCalls, layout })),
    ),
    ...nt.map((reward, index) => rename(rollout({ q, index, reward, path: 'no-tool', layout: 'gg' }))),
  ];
}

t.test('tool-dependent: the correct frozen rollout with the fewest calls', async (t) => {
  const rec = offlineTargetOf(
    'q',
    frozen(
      'q',
      [
        [0, 3],
        [1, 2],
        [1, 1, 'ggog'],
      ],
      [0, 0],
    ),
    opts,
  );
  t.same(rec.label, {
    wt: true,
    nt: false,
    category: 'tool-dependent',
    targetRolloutId: 'frozen.q.wt2',
    tieBreakSeed: rec.label.tieBreakSeed,
  });
  // rollout() gives with-tool ids 100 + 10 * index + j, logprob -(j + 1) / 10 on generated tokens.
  t.same(rec.target, {
    rolloutId: 'frozen.q.wt2',
    path: 'with-tool',
    context: 'with-tool',
    promptTokens: [1, 2],
    responseTokens: [120, 121, 122, 123],
    responseLogprobs: [-0.1, -0.2, 0, -0.4],
    responseMask: [1, 1, 0, 1],
  });
  t.same(
    rec.rollouts.map((r) => [r.rolloutId, r.reward, r.toolCalls, r.generated]),
    [
      ['frozen.q.wt0', 0, 3, 3],
      ['frozen.q.wt1', 1, 2, 3],
      ['frozen.q.wt2', 1, 1, 3],
      ['frozen.q.nt0', 0, 0, 2],
      ['frozen.q.nt1', 0, 0, 2],
    ],
  );
  t.equal(rec.checkpointSha256, 'a'.repeat(64));
  // The label is the record's own: offlineLabel over the summaries gives the same pick.
  t.equal(offlineLabel('q', rec.rollouts, opts).target?.rolloutId, 'frozen.q.wt2');
  // `shortest`: generated tokens, not calls (wt1 has 2 generated of 'gog', wt2 3).
  const short = offlineTargetOf(
    'q',
    frozen(
      'q',
      [
        [1, 5, 'gog'],
        [1, 1, 'ggg'],
      ],
      [0],
    ),
    {
      ...opts,
      targetSelection: 'shortest',
    },
  );
  t.equal(short.label.targetRolloutId, 'frozen.q.wt0');
});

t.test('efficiency / hallucination: a correct no-tool target, with-tool prompt or its own', async (t) => {
  const rs = frozen('e', [[1, 1]], [0, 1]);
  const wt = offlineTargetOf('e', rs, opts);
  t.equal(wt.label.category, 'efficiency');
  t.equal(wt.label.targetRolloutId, 'frozen.e.nt1', 'the only correct no-tool rollout');
  t.same(wt.target?.promptTokens, [1, 2], 're-conditioned on the with-tool prompt');
  t.equal(wt.target?.context, 'with-tool');
  const own = offlineTargetOf('e', rs, { ...opts, targetContext: 'own' });
  t.same(own.target?.promptTokens, [3, 4, 5], 'its own no-tool prompt');
  t.equal(own.target?.context, 'no-tool');
  t.same(own.target?.responseTokens, [210, 211]);
  const h = offlineTargetOf('h', frozen('h', [[0, 2]], [1]), opts);
  t.equal(h.label.category, 'hallucination');
  const none = offlineTargetOf(
    'b',
    frozen(
      'b',
      [
        [0, 2],
        [0, 1],
      ],
      [0],
    ),
    opts,
  );
  t.equal(none.label.category, 'both-wrong');
  t.equal(none.target, null);
  t.equal(none.label.targetRolloutId, null);
});

// Known answers (deriveSeed(deriveSeed(runSeed, 'offline-akbe'), 'target', 0, 'q'), then Rng.pick).
const KNOWN_PICKS = [
  'frozen.q.wt2',
  'frozen.q.wt0',
  'frozen.q.wt1',
  'frozen.q.wt2',
  'frozen.q.wt2',
  'frozen.q.wt3',
];
const KNOWN_SEEDS = [1189580389, 2820581005, 1004882107, 1717087399, 2230786037, 3833750777];
t.test('ties: one seeded pick per question for the whole run (known answers)', async (t) => {
  const rs = frozen(
    'q',
    [
      [1, 1],
      [1, 1],
      [1, 1],
      [1, 1],
    ],
    [0],
  );
  const picks = [0, 1, 2, 3, 4, 5].map((seed) => offlineTargetOf('q', rs, { ...opts, runSeed: seed }).label);
  t.same(
    picks.map((l) => l.targetRolloutId),
    KNOWN_PICKS,
  );
  t.same(
    picks.map((l) => l.tieBreakSeed),
    KNOWN_SEEDS,
  );
});

t.test('frozenReward: EM of the recorded answer when the format held', async (t) => {
  const r = { answer: 'Paris', formatOk: true, stopReason: 'answer' as const };
  t.equal(frozenReward(r, ['paris']), 1, 'Search-R1 normalisation');
  t.equal(frozenReward(r, ['london']), 0);
  t.equal(frozenReward({ ...r, formatOk: false }, ['paris']), 0);
  t.equal(frozenReward({ ...r, stopReason: 'length' }, ['paris']), 0);
  t.equal(frozenReward({ ...r, answer: null }, ['paris']), 0);
});

const input = (over: Record<string, unknown> = {}) => ({
  runSeed: 7,
  batchQuestions: 2,
  miniBatchQuestions: 2,
  algo: 'offline-akbe',
  advantage: 'grpo',
  targetSelection: 'min-tool-calls' as const,
  targetContext: 'with-tool' as const,
  losses: [],
  initialVersion: 0,
  ...over,
});

t.test('prepareStep: the frozen targets are own rows, the on-policy targets are not trained', async (t) => {
  // On-policy: q1 tool-dependent (its own target would be q1.wt0), q2 hallucination.
  const groups = [group('q1', [1, 0], [0]), group('q2', [0, 0], [1])];
  const offlineTargets: Record<string, OfflineTarget> = {
    // q1's frozen target: 3 generated tokens of 'ggog'; q2's: a no-tool one of 2 ('gg').
    q1: offlineTargetOf('q1', frozen('q1', [[1, 1, 'ggog']], [0]), opts),
    q2: offlineTargetOf('q2', frozen('q2', [[0, 1]], [1]), opts),
  };
  const p = prepareStep(input({ offlineTargets }), groups, {});
  t.same(
    p.labels.map((l) => [l.questionId, l.category]).sort(),
    [
      ['q1', 'tool-dependent'],
      ['q2', 'hallucination'],
    ],
    'the on-policy boundary is still labelled',
  );
  const b = p.batch;
  const rows = b.rowInfo.map((r, i) => [r.rolloutId, b.pgWeight[i], b.akbeWeight[i], b.recomputeOld[i]]);
  // Per question: its 2 with-tool rows (GRPO), then its frozen target (L_AKBE only, pi_old recomputed).
  // Per-target weights over the mini-batch's K = 2 targets: 1 / (2 * 3) and 1 / (2 * 2).
  const expected = {
    q1: [
      ['q1.wt0', 1, 0, 0],
      ['q1.wt1', 1, 0, 0],
      ['frozen.q1.wt0', 0, Math.fround(1 / 6), 1],
    ],
    q2: [
      ['q2.wt0', 1, 0, 0],
      ['q2.wt1', 1, 0, 0],
      ['frozen.q2.nt0', 0, Math.fround(1 / 4), 1],
    ],
  };
  t.same(
    rows,
    p.groups.flatMap((g) => expected[g.questionId as 'q1' | 'q2']),
  );
  const f1 = b.rowInfo.findIndex((r) => r.rolloutId === 'frozen.q1.wt0');
  const f2 = b.rowInfo.findIndex((r) => r.rolloutId === 'frozen.q2.nt0');
  t.equal(b.rowInfo[f2].context, 'with-tool');
  // T = 6 (prompt 2 + 4); row f1's mask: response tokens 0, 1, 3 at positions 1, 2, 4.
  t.equal(b.T, 6);
  const mask = (r: number) => Array.from(b.lossMask.subarray(r * 5, r * 5 + 5));
  t.same(mask(f1), [0, 1, 1, 0, 1]);
  t.same(Array.from(b.inputIds.subarray(f1 * 6, f1 * 6 + 6)), [1, 2, 100, 101, 102, 103]);
  t.same(Array.from(b.oldLogprobs.subarray(f1 * 5, f1 * 5 + 5)), [0, 0, 0, 0, 0], 'not pi_old: recomputed');
  t.same(mask(f2), [0, 1, 1, 0, 0]);
  // Pooled: one token-mean over the 5 target tokens.
  const pooled = prepareStep(input({ offlineTargets, akbeAggregation: 'pooled' }), groups, {}).batch;
  t.same([pooled.akbeWeight[f1], pooled.akbeWeight[f2]], [Math.fround(1 / 5), Math.fround(1 / 5)]);
  // A question whose frozen rollouts gave no target adds no row.
  const none = { ...offlineTargets, q2: offlineTargetOf('q2', frozen('q2', [[0, 1]], [0]), opts) };
  const nb = prepareStep(input({ offlineTargets: none }), groups, {}).batch;
  t.equal(nb.rows, 5);
  t.equal(nb.akbeWeight[nb.rowInfo.findIndex((r) => r.rolloutId === 'frozen.q1.wt0')], Math.fround(1 / 3));
  // The loss terms are akbe's (same lambda and form).
  t.same(
    lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, algo: 'offline-akbe' }),
    lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, algo: 'akbe' }),
  );
  t.throws(() => prepareStep(input({ offlineTargets: { q1: offlineTargets.q1 } }), groups, {}), {
    message: 'learner: offline-akbe has no offline target record for question q2',
  });
  t.equal(getAlgorithm('offline-akbe').akbeTargets, false);
});

t.test('config: frozenPolicy required for offline-akbe, refused elsewhere', async (t) => {
  t.throws(() => validateTrainConfig({ algo: 'offline-akbe' }), {
    message: /^config\.frozenPolicy is required when config\.algo is 'offline-akbe'/,
  });
  t.throws(() => validateTrainConfig({ algo: 'akbe', frozenPolicy: 'x' }), {
    message: /^config\.frozenPolicy is only for offline-akbe/,
  });
  t.throws(() => validateTrainConfig({ algo: 'offline-akbe', frozenPolicy: '' }), {
    message: /^config\.frozenPolicy must be a checkpoint directory/,
  });
  t.equal(
    validateTrainConfig({ algo: 'offline-akbe', frozenPolicy: 'run:paper-grpo-s0' }).frozenPolicy,
    'run:paper-grpo-s0',
  );
  t.throws(() => validateTrainConfig({ algo: 'offline-akbe', frozenPolicy: 'x', gNoTool: 0 }), {
    message: /config\.gNoTool must be >= 1/,
  });
});

t.test('a run spec read back from run.started keeps frozenPolicy (resume, remote roles)', async (t) => {
  const spec = runSpecOf({
    algo: 'offline-akbe',
    frozenPolicy: 'run:paper-grpo-s0',
    worldDir: 'w',
    basePolicy: 'b',
  });
  t.equal(spec.train.algo, 'offline-akbe');
  t.equal(spec.train.frozenPolicy, 'run:paper-grpo-s0');
  t.equal(runSpecOf({ algo: 'akbe', worldDir: 'w', basePolicy: 'b' }).train.frozenPolicy, undefined);
});
