/**
 * Every rule of the training config and of the loss options at its boundary: the last value
 * accepted and the first refused, with the exact message (found by mutation testing: the rules'
 * comparisons could be loosened or dropped without a test noticing).
 */
import t from 'tap';
import { DEFAULT_TRAIN_CONFIG, type TrainConfig, validateTrainConfig } from '../src/rl/config.js';
import { checkFormat, parseTurn } from '../src/rl/format.js';
import { getLoss, registerLoss } from '../src/rl/losses.js';

const accepts = (over: Record<string, unknown>) => validateTrainConfig(over);
const refusal = (over: unknown) => {
  try {
    validateTrainConfig(over);
  } catch (e) {
    return `${(e as Error).name} ${(e as { key?: string }).key}: ${(e as Error).message}`;
  }
  return 'accepted';
};

t.test('numeric and integer rules: the boundary value passes, the next one is refused by name', async (t) => {
  // [key, last accepted, first refused, rule as printed]
  const cases: Array<[keyof TrainConfig, number, number, string]> = [
    ['steps', 1, 0, 'an integer >= 1'],
    ['batchQuestions', 1, 0, 'an integer >= 1'],
    ['gWithTool', 2, 0, 'an integer >= 1'],
    ['gNoTool', 0, -1, 'an integer >= 0'],
    ['maxToolCalls', 0, -1, 'an integer >= 0'],
    ['maxResponseTokens', 1, 0, 'an integer >= 1'],
    ['ppoEpochs', 1, 0, 'an integer >= 1'],
    ['lambda', 0, -1e-9, "a number >= 0 or 'auto'"],
    ['clipEps', 1e-9, 0, 'a number in (0, 1)'],
    ['clipEps', 0.999, 1, 'a number in (0, 1)'],
    ['lr', 1e-12, 0, 'a number > 0'],
    ['seed', 0, -1, 'an integer in [0, 2^32)'],
    ['seed', 0xffffffff, 2 ** 32, 'an integer in [0, 2^32)'],
    ['temperature', 1e-6, 0, 'a number > 0'],
    ['topP', 1, 1.0001, 'a number in (0, 1]'],
    ['topP', 1e-6, 0, 'a number in (0, 1]'],
    ['behaviourWeightCap', 1.000001, 1, 'a number > 1'],
  ];
  const base = { algo: 'grpo', miniBatchQuestions: 1 };
  for (const [key, ok, bad, rule] of cases) {
    t.equal(accepts({ ...base, [key]: ok })[key], ok, `${key} ${ok} accepted`);
    t.equal(
      refusal({ ...base, [key]: bad }),
      `ConfigError ${key}: config.${key} must be ${rule}, got ${JSON.stringify(bad)}`,
      `${key} ${bad} refused`,
    );
  }
  t.equal(refusal({ seed: 1.5 }), 'ConfigError seed: config.seed must be an integer in [0, 2^32), got 1.5');
  t.equal(refusal({ seed: '1' }), 'ConfigError seed: config.seed must be an integer in [0, 2^32), got "1"');
  t.equal(refusal({ steps: '2' }), 'ConfigError steps: config.steps must be an integer >= 1, got "2"');
  t.equal(refusal({ lr: '0.1' }), 'ConfigError lr: config.lr must be a number > 0, got "0.1"');
  t.equal(
    refusal({ targetSelection: 'longest' }),
    `ConfigError targetSelection: config.targetSelection must be one of 'min-tool-calls', 'shortest', got "longest"`,
  );
  t.equal(accepts({ targetSelection: 'shortest' }).targetSelection, 'shortest');
  t.equal(accepts({}).maxStaleness, 0, 'maxStaleness defaults to 0 (synchronous, the paper)');
  t.equal(accepts({}).behaviourWeightCap, 5, 'behaviourWeightCap defaults to 5 (AReaL)');
  t.equal(accepts({ maxStaleness: 1 }).maxStaleness, 1, 'asynchronous training: maxStaleness >= 1');
  t.equal(accepts({ maxStaleness: 2 }).maxStaleness, 2);
  t.equal(
    refusal({ maxStaleness: -1 }),
    'ConfigError maxStaleness: config.maxStaleness must be an integer >= 0, got -1',
  );
  t.equal(
    refusal({ maxStaleness: 0.5 }),
    'ConfigError maxStaleness: config.maxStaleness must be an integer >= 0, got 0.5',
  );
  t.match(refusal({ algo: 7 }), /^ConfigError algo: config\.algo must be one of .*'grpo'.*, got 7$/);
  t.equal(accepts({}).batchInvariantDecode, true, 'batch-invariant decoding is on by default (issue 22)');
  t.equal(accepts({ batchInvariantDecode: false }).batchInvariantDecode, false, 'and can be turned off');
  t.equal(
    refusal({ batchInvariantDecode: 'yes' }),
    'ConfigError batchInvariantDecode: config.batchInvariantDecode must be true or false, got "yes"',
  );
});

t.test('non-finite numbers are printed by name; a non-object config is refused as a whole', async (t) => {
  t.equal(refusal({ topP: Number.NaN }), 'ConfigError topP: config.topP must be a number in (0, 1], got NaN');
  t.equal(
    refusal({ lambda: Number.NEGATIVE_INFINITY }),
    "ConfigError lambda: config.lambda must be a number >= 0 or 'auto', got -Infinity",
  );
  t.equal(
    refusal({ temperature: Number.POSITIVE_INFINITY }),
    'ConfigError temperature: config.temperature must be a number > 0, got Infinity',
  );
  t.equal(refusal('steps: 3'), 'ConfigError : config must be an object of settings, got "steps: 3"');
  t.equal(refusal([1, 2]), 'ConfigError : config must be an object of settings, got [1,2]');
  t.equal(refusal(7), 'ConfigError : config must be an object of settings, got 7');
  t.same(validateTrainConfig(null), DEFAULT_TRAIN_CONFIG);
  t.not(validateTrainConfig(null), DEFAULT_TRAIN_CONFIG, 'a copy, not the shared defaults');
  t.equal(
    refusal({ stepz: 1 }),
    `ConfigError stepz: config.stepz is not a known setting; known: ${[...Object.keys(DEFAULT_TRAIN_CONFIG), 'frozenPolicy'].join(', ')}`,
  );
});

t.test('the cross-key rules', async (t) => {
  t.equal(
    refusal({ gWithTool: 1 }),
    "ConfigError gWithTool: config.gWithTool must be >= 2: GRPO compares a question's with-tool rollouts within their group (advantage (r - mean) / std), so a group of one learns nothing, got 1",
  );
  t.equal(accepts({ miniBatchQuestions: 8, batchQuestions: 8 }).miniBatchQuestions, 8, 'M = B is allowed');
  t.equal(
    refusal({ miniBatchQuestions: 9, batchQuestions: 8 }),
    'ConfigError miniBatchQuestions: config.miniBatchQuestions must be <= config.batchQuestions (8), got 9',
  );
  t.match(refusal({ gNoTool: 0 }), /^ConfigError gNoTool: /);
});

t.test('loss options at their boundaries; the registry keeps each name to one spec', async (t) => {
  const grpo = getLoss('grpo');
  const nll = getLoss('akbe-nll');
  const clipped = getLoss('akbe-clipped');
  t.same([grpo.options, nll.options, clipped.options], [['clipEps'], ['lambda'], ['lambda', 'clipEps']]);
  t.match(grpo.description, /^token-mean PPO clipped surrogate/);
  t.match(nll.description, /^lambda \* token-mean NLL/);
  t.match(clipped.description, /^lambda \* PPO-style clipped surrogate/);
  const err = (f: () => void) => {
    try {
      f();
    } catch (e) {
      return (e as Error).message;
    }
    return 'accepted';
  };
  for (const spec of [grpo, clipped]) {
    const l = spec === clipped ? { lambda: 0 } : {};
    t.equal(
      err(() => spec.validate({ ...l, clipEps: 1e-9 })),
      'accepted',
    );
    t.equal(
      err(() => spec.validate({ ...l, clipEps: 0.999 })),
      'accepted',
    );
    t.equal(
      err(() => spec.validate({ ...l, clipEps: 0 })),
      'loss option clipEps must be a number in (0, 1), got 0',
    );
    t.equal(
      err(() => spec.validate({ ...l, clipEps: 1 })),
      'loss option clipEps must be a number in (0, 1), got 1',
    );
    t.equal(
      err(() => spec.validate({ ...l })),
      'loss option clipEps must be a number in (0, 1), got undefined',
    );
  }
  t.equal(
    err(() => nll.validate({ lambda: 0 })),
    'accepted',
    'lambda 0 is allowed',
  );
  t.equal(
    err(() => nll.validate({ lambda: -1e-9 })),
    'loss option lambda must be a number >= 0, got -1e-9',
  );
  t.equal(
    err(() => clipped.validate({ lambda: -1, clipEps: 0.2 })),
    'loss option lambda must be a number >= 0, got -1',
  );
  t.equal(
    err(() => nll.validate({ lambda: Number.NaN })),
    'loss option lambda must be a number >= 0, got null',
  );
  t.equal(
    err(() => registerLoss('grpo', grpo)),
    'accepted',
    'the same spec again is not a conflict',
  );
  t.equal(
    err(() => registerLoss('grpo', { ...grpo })),
    "loss 'grpo' is already registered with a different implementation",
  );
});

t.test('tool tags must be plain words other than the grammar tags', async (t) => {
  for (const tag of ['think', 'information', 'answer', '1st', 'a b', 'x>', '', 'tool!'])
    t.throws(
      () => checkFormat('<answer>a</answer>', 'with-tool', { maxToolCalls: 1, toolTags: ['search', tag] }),
      {
        name: 'RangeError',
        message: `tool tag '${tag}' must be a word other than think, information and answer`,
      },
      `'${tag}' refused`,
    );
  t.same(parseTurn('<look_up-2>q</look_up-2>', ['look_up-2']), { kind: 'look_up-2', query: 'q' });
  t.same(parseTurn('<search> q </search>'), { kind: 'search', query: 'q' }, 'the block opens at 0');
  t.same(parseTurn('q</search>'), { kind: 'search', query: '' }, 'no opening tag: an empty query');
  t.same(parseTurn('x<answer>a</answer>'), { kind: 'answer', answer: 'a' });
  // The same tag set in another order is another grammar (the cache is keyed by the list).
  const two = ['search', 'calc'];
  t.equal(
    checkFormat('<calc>1+1</calc><information>2</information><answer>2</answer>', 'with-tool', {
      maxToolCalls: 2,
      toolTags: two,
    }).ok,
    true,
  );
  t.equal(
    checkFormat('<calc>1+1</calc><information>2</information><answer>2</answer>', 'with-tool', {
      maxToolCalls: 2,
      toolTags: ['search'],
    }).ok,
    false,
  );
});

t.test('each grammar failure has its own reason', async (t) => {
  const opts = { maxToolCalls: 2 };
  const cases: Array<[string, string]> = [
    ['<think>a<answer>b</answer>', 'nested-tag'],
    ['<think>a</answer>', 'unexpected-closing-tag'],
    ['</think><answer>a</answer>', 'unexpected-closing-tag'],
    ['<search>q</search></think>', 'missing-information'],
    ['<answer>a</answer> more <think>b</think>', 'content-after-answer'],
    ['<answer>a</answer><think>b</think>', 'content-after-answer'],
    ['<search>q</search> text <information>d</information>', 'missing-information'],
    ['<think>a</think> text <answer>b</answer>', 'text-outside-blocks'],
    ['<answer>a</answer> tail', 'content-after-answer'],
    ['<think>a</think> tail', 'text-outside-blocks'],
    ['<search>q</search> tail', 'missing-information'],
    ['<search>q</search>', 'missing-information'],
    ['<think>a</think>', 'no-answer'],
    ['<answer>a</answer>', 'ok'],
  ];
  for (const [text, reason] of cases) t.equal(checkFormat(text, 'with-tool', opts).reason, reason, text);
  const seg = (kind: 'generated' | 'observation', text: string) => ({ kind, text });
  t.equal(
    checkFormat([seg('generated', '<search>q</search><information>made up')], 'with-tool', opts).reason,
    'generated-information',
    'an opening <information> written by the policy',
  );
  t.equal(
    checkFormat(
      [
        seg('generated', '<search>q</search>'),
        seg('observation', '<information>d</information>'),
        seg('generated', '<answer>a</answer>'),
      ],
      'with-tool',
      opts,
    ).reason,
    'ok',
  );
});
