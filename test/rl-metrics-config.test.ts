import t from 'tap';
import { DEFAULT_TRAIN_CONFIG, validateTrainConfig } from '../src/rl/config.js';
import { getLoss, listLosses, lossTermsFor, registerLoss } from '../src/rl/losses.js';
import { boundaryShifts, evalMetrics, stepMetrics } from '../src/rl/metrics.js';
import type { BoundaryLabel } from '../src/rl/types.js';
import { group } from './helpers/rollouts.js';

t.test('EM, TC and TP per split and overall; TP is null with no tool call at all', async (t) => {
  const m = evalMetrics([
    { split: 'single-hop', correct: 1, toolCalls: 0 },
    { split: 'single-hop', correct: 1, toolCalls: 2 },
    { split: 'multi-hop', correct: 0, toolCalls: 3 },
    { split: 'multi-hop', correct: 1, toolCalls: 1 },
    { split: 'memory', correct: 1, toolCalls: 0 },
  ]);
  t.same(m.splits['single-hop'], { n: 2, em: 1, tc: 1, tp: 1 });
  t.same(m.splits['multi-hop'], { n: 2, em: 0.5, tc: 2, tp: 0.25 });
  t.same(m.splits.memory, { n: 1, em: 1, tc: 0, tp: null }, 'x/0 is undefined, not Infinity');
  t.same(m.overall, { n: 5, em: 0.8, tc: 1.2, tp: 4 / 6 });
  t.same(Object.keys(m.splits), ['memory', 'multi-hop', 'single-hop']);
  t.same(evalMetrics([]).overall, { n: 0, em: 0, tc: 0, tp: null }, '0/0');
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

t.test('validateTrainConfig fills defaults and names the bad key', async (t) => {
  t.same(validateTrainConfig({}), DEFAULT_TRAIN_CONFIG);
  t.same(validateTrainConfig(undefined), DEFAULT_TRAIN_CONFIG);
  t.equal(validateTrainConfig({ lambda: 0.1, algo: 'grpo' }).lambda, 0.1);
  const bad: Array<[unknown, string]> = [
    [{ lambda: 'x' }, 'config.lambda must be a number >= 0, got "x"'],
    [{ lambda: -1 }, 'config.lambda must be a number >= 0, got -1'],
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
  t.same(listLosses(), ['akbe-clipped', 'akbe-nll', 'grpo']);
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
    message: "unknown loss 'akbe-dpo'; known: akbe-clipped, akbe-nll, grpo",
  });
  t.throws(() => registerLoss('grpo', { description: 'other', options: [], validate: () => {} }), {
    name: 'DuplicateRegistrationError',
  });
  t.throws(() => getLoss('akbe-nll').validate({ lambda: -1 }), /lambda must be a number >= 0/);
});
