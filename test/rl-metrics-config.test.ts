import t from 'tap';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG, validateTrainConfig } from '../src/rl/config.js';
import { effectiveLambda, getLoss, listLosses, registerLoss } from '../src/rl/losses.js';
import {
  answerMetrics,
  boundaryShifts,
  countedToolCalls,
  oracleRatesExtra,
  oracleSearchRates,
  stepMetrics,
} from '../src/rl/metrics.js';
import type { BoundaryLabel } from '../src/rl/types.js';
import { group } from './helpers/rollouts.js';

t.test('EM, TC and TP over answers; TP is null with no tool call at all', async (t) => {
  const m = answerMetrics([
    { correct: 1, toolCalls: 0, stopReason: 'answer' },
    { correct: 1, toolCalls: 2, stopReason: 'answer' },
    { correct: 0, toolCalls: 3, stopReason: 'length' },
    { correct: 1, toolCalls: 1, stopReason: 'answer' },
  ]);
  t.same(m, { n: 4, em: 0.75, tc: 1.5, tp: 3 / 6 });
  t.same(answerMetrics([{ correct: 1, toolCalls: 0, stopReason: 'answer' }]).tp, null, 'x/0 is undefined');
  t.same(answerMetrics([]), { n: 0, em: 0, tc: 0, tp: null }, '0/0');
});

t.test('TC counts a refused call past the limit, as Search-R1 counts its last turn', async (t) => {
  // maxToolCalls 6: six searches answered, a 7th asked for and refused (stop tool-limit, reward 0).
  const limited = { correct: 0, toolCalls: 6, stopReason: 'tool-limit' };
  t.equal(countedToolCalls(limited), 7);
  t.equal(countedToolCalls(limited, 'executed'), 6, 'the rule of logs before session 3');
  t.equal(countedToolCalls({ toolCalls: 2, stopReason: 'answer' }), 2);
  const m = answerMetrics([limited, { correct: 1, toolCalls: 1, stopReason: 'answer' }]);
  t.same(m, { n: 2, em: 0.5, tc: 4, tp: 1 / 8 });
  const g = group('a', [0, 1], [0], { wtCalls: [6, 1] });
  g.withTool[0].stopReason = 'tool-limit';
  t.equal(stepMetrics([g], [], []).toolCallsPerBatch, 8);
  t.equal(stepMetrics([g], [], [], 'executed').toolCallsPerBatch, 7);
});

const label = (questionId: string, category: BoundaryLabel['category']): BoundaryLabel => ({
  questionId,
  wt: category === 'tool-dependent' || category === 'efficiency',
  nt: category === 'efficiency' || category === 'hallucination',
  category,
  target: null,
  tieBreakSeed: 0,
});

t.test(
  'boundary shifts: a changed category since the previous label; first labels are not shifts',
  async (t) => {
    const s1 = boundaryShifts(new Map(), [label('a', 'tool-dependent'), label('b', 'both-wrong')]);
    t.same(s1.shifts, []);
    const s2 = boundaryShifts(s1.latest, [label('a', 'efficiency'), label('c', 'hallucination')]);
    t.same(s2.shifts, [{ questionId: 'a', from: 'tool-dependent', to: 'efficiency' }]);
    t.same(Object.fromEntries(s2.latest), { a: 'efficiency', b: 'both-wrong', c: 'hallucination' });
    t.equal(s1.latest.get('a'), 'tool-dependent', 'the previous map is not mutated');
  },
);

t.test('step metrics: tool calls per batch, response length, categories', async (t) => {
  const g1 = group('a', [1, 0], [0], { wtCalls: [2, 1] });
  const g2 = group('b', [0, 0], [1], { wtCalls: [0, 3] });
  g1.withTool[1].formatOk = false;
  const m = stepMetrics(
    [g1, g2],
    [label('a', 'tool-dependent'), label('b', 'hallucination')],
    [{ questionId: 'a', from: 'efficiency', to: 'tool-dependent' }],
  );
  t.equal(m.toolCallsPerBatch, 6);
  t.equal(m.meanToolCalls, 1.5);
  t.equal(m.meanResponseLength, 3);
  t.equal(m.trainReward, 0.25);
  t.equal(m.noToolEm, 0.5);
  t.equal(m.formatFailures, 1);
  t.same(m.categories, { 'tool-dependent': 1, efficiency: 0, hallucination: 1, 'both-wrong': 0 });
  t.equal(m.boundaryShifts, 1);
});

t.test('oracle rates: searches on known questions, no search on unknown ones, with-tool only', async (t) => {
  const groups = [
    group('a', [1, 0, 1], [1], { wtCalls: [2, 0, 1] }), // known: 2 of 3 searched
    group('b', [0], [0, 0], { wtCalls: [0] }), // known: 0 of 1
    group('c', [0, 1, 0], [0], { wtCalls: [0, 3, 0] }), // unknown: 2 of 3 did not search
    group('d', [0, 0], [], { wtCalls: [0, 0] }), // no oracle: left out
  ];
  const oracle: Record<string, boolean> = { a: true, b: true, c: false };
  const rates = oracleSearchRates(groups, (id) => oracle[id]);
  // (2 + 0) / (3 + 1); the no-tool rollouts (0 calls) would make it 2/7 if they were counted.
  t.equal(rates.knownSearchRate, 0.5);
  t.equal(rates.unknownNoSearchRate, 2 / 3);
  t.same(oracleRatesExtra(rates), { knownSearchRate: 0.5, unknownNoSearchRate: 2 / 3 });
  const onlyUnknown = oracleSearchRates(groups, (id) => (id === 'c' ? false : undefined));
  t.same(onlyUnknown, { knownSearchRate: null, unknownNoSearchRate: 2 / 3 }, '0/0 is null');
  t.same(oracleRatesExtra(onlyUnknown), { unknownNoSearchRate: 2 / 3 }, 'a null rate is not recorded');
  t.same(oracleRatesExtra(oracleSearchRates(groups, () => undefined)), {}, 'no oracle, no keys');
  // A call refused by the limit counts as TC counts it (countedToolCalls): 'emitted' by default.
  const refused = group('e', [0], [], { wtCalls: [0] });
  refused.withTool[0].stopReason = 'tool-limit';
  t.equal(oracleSearchRates([refused], () => true).knownSearchRate, 1);
  t.equal(oracleSearchRates([refused], () => true, 'executed').knownSearchRate, 0);
});

t.test('validateTrainConfig fills defaults and names the bad key', async (t) => {
  t.same(validateTrainConfig({}), DEFAULT_TRAIN_CONFIG);
  t.same(validateTrainConfig(undefined), DEFAULT_TRAIN_CONFIG);
  t.equal(validateTrainConfig({ lambda: 0.1, algo: 'grpo' }).lambda, 0.1);
  const bad: Array<[unknown, string]> = [
    [{ lambda: 'x' }, 'config.lambda must be a number >= 0 or \'auto\', got "x"'],
    [{ lambda: -1 }, "config.lambda must be a number >= 0 or 'auto', got -1"],
    [
      { akbeAggregation: 'mean' },
      "config.akbeAggregation must be one of 'per-target', 'pooled', got \"mean\"",
    ],
    [{ batchQuestions: 2.5 }, 'config.batchQuestions must be an integer >= 1, got 2.5'],
    [{ clipEps: 1 }, 'config.clipEps must be a number in (0, 1), got 1'],
    [{ akbeLossForm: 'dpo' }, "config.akbeLossForm must be one of 'nll', 'clipped', got \"dpo\""],
    [{ targetContext: 'tool' }, "config.targetContext must be one of 'with-tool', 'own', got \"tool\""],
    [{ advantage: 'gae' }, "config.advantage must be one of 'dr-grpo', 'grpo', got \"gae\""],
    [
      { miniBatchQuestions: 16, batchQuestions: 8 },
      'config.miniBatchQuestions must be <= config.batchQuestions (8), got 16',
    ],
    [
      { gNoTool: 0 },
      "config.gNoTool must be >= 1 when config.algo is 'akbe' (the no-tool probe labels the boundary), got 0",
    ],
  ];
  for (const [obj, message] of bad)
    t.throws(() => validateTrainConfig(obj), { name: 'ConfigError', message }, message);
  t.throws(() => validateTrainConfig({ lamda: 0.1 }), {
    name: 'ConfigError',
    key: 'lamda',
    message: /config\.lamda is not a known setting/,
  });
  t.throws(() => validateTrainConfig([1]), { name: 'ConfigError' });
  t.equal(validateTrainConfig({ gNoTool: 0, algo: 'grpo' }).gNoTool, 0, 'GRPO alone needs no no-tool probe');
});

t.test('loss registry: config choices map to registered, validated loss terms', async (t) => {
  t.same(listLosses(), ['akbe-clipped', 'akbe-nll', 'dpo', 'grpo']);
  t.same(lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, algo: 'grpo' }), [
    { name: 'grpo', options: { clipEps: 0.2 } },
  ]);
  t.same(
    lossTermsFor(DEFAULT_TRAIN_CONFIG).map((l) => l.name),
    ['grpo', 'akbe-nll'],
  );
  t.same(lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, akbeLossForm: 'clipped' })[1], {
    name: 'akbe-clipped',
    options: { lambda: 0.05, clipEps: 0.2 },
  });
  t.throws(() => getLoss('akbe-dpo'), {
    name: 'UnknownRegistryNameError',
    message: "unknown loss 'akbe-dpo'; known: akbe-clipped, akbe-nll, dpo, grpo",
  });
  t.throws(() => registerLoss('grpo', { description: 'other', options: [], validate: () => {} }), {
    name: 'DuplicateRegistrationError',
  });
  t.throws(() => getLoss('akbe-nll').validate({ lambda: -1 }), /lambda must be a number >= 0/);
});

t.test("lambda 'auto' is the appendix-B rule: 0.05 at G_wt 16, scaled with 1 / G_wt", async (t) => {
  t.equal(validateTrainConfig({ lambda: 'auto' }).lambda, 'auto');
  t.equal(effectiveLambda({ lambda: 'auto', gWithTool: 16 }), 0.05);
  t.equal(effectiveLambda({ lambda: 'auto', gWithTool: 8 }), 0.1);
  t.equal(effectiveLambda({ lambda: 'auto', gWithTool: 32 }), 0.025);
  t.equal(effectiveLambda({ lambda: 0.3, gWithTool: 8 }), 0.3);
  const cfg = validateTrainConfig({ lambda: 'auto', gWithTool: 4 });
  t.same(lossTermsFor(cfg)[1], { name: 'akbe-nll', options: { lambda: 0.2 } });
});
