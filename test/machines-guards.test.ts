/**
 * The machines' guards and orderings that the first mutation run left alive (issue 16): the
 * learner's batch does not depend on the order groups arrive in, a resumed learner's memory of
 * categories, the run ignoring a policy version other than the next, the rollout's length and
 * tool-limit decisions at their edges, custom tool tags, no-tool results sorted by index, and the
 * default actors' messages. Each expected value is written out by hand.
 */
import t from 'tap';
import { createActor, fromPromise, toPromise, waitFor } from 'xstate';
import type { AkbeFact, LearnerFact } from '../src/machines/facts.js';
import {
  type LearnerInput,
  learnerMachine,
  prepareStep,
  type TrainRequest,
  type TrainResult,
} from '../src/machines/learner.js';
import { type QuestionInput, questionMachine } from '../src/machines/question.js';
import {
  type GenerateRequest,
  type GenerateResult,
  type RolloutInput,
  rolloutMachine,
} from '../src/machines/rollout.js';
import { type RunInput, runMachine } from '../src/machines/run.js';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';
import { deriveSeed } from '../src/util/rng.js';
import { group } from './helpers/rollouts.js';
import {
  fakeSearch,
  type ScriptedCalls,
  scriptedGenerate,
  ToyTokenizer,
  toyCallSpan,
} from './helpers/scripted-policy.js';

t.test('machine ids', async (t) => {
  t.strictSame(
    [rolloutMachine.id, questionMachine.id, learnerMachine.id, runMachine.id],
    ['rollout', 'question', 'learner', 'run'],
  );
});

const learnerInput = (over: Partial<LearnerInput> = {}): LearnerInput => ({
  runSeed: 5,
  batchQuestions: 3,
  miniBatchQuestions: 2,
  algo: 'akbe',
  advantage: 'grpo',
  targetSelection: 'min-tool-calls',
  targetContext: 'with-tool',
  losses: lossTermsFor(DEFAULT_TRAIN_CONFIG),
  initialVersion: 0,
  ...over,
});

const groups = () => [
  group('A', [1, 0, 1], [0, 0], { wtCalls: [2, 1, 1] }),
  group('B', [1, 0], [0, 1]),
  group('C', [0, 0], [0, 0]),
  group('D', [0, 1], [1, 1]),
];

t.test(
  'prepareStep: the same batch whatever order the groups arrived in; the input is not reordered',
  async (t) => {
    const inOrder = groups();
    const reversed = groups().reverse();
    const rotated = [...groups().slice(2), ...groups().slice(0, 2)];
    const a = prepareStep(learnerInput({ batchQuestions: 4 }), inOrder, {});
    const b = prepareStep(learnerInput({ batchQuestions: 4 }), reversed, {});
    const c = prepareStep(learnerInput({ batchQuestions: 4 }), rotated, {});
    const ids = (p: typeof a) => p.groups.map((g) => g.questionId);
    t.strictSame(ids(b), ids(a));
    t.strictSame(ids(c), ids(a));
    t.strictSame(Array.from(b.batch.inputIds), Array.from(a.batch.inputIds), 'identical batch rows');
    t.strictSame(Array.from(c.batch.advantages), Array.from(a.batch.advantages));
    t.strictSame(
      reversed.map((g) => g.questionId),
      ['D', 'C', 'B', 'A'],
      "the caller's array is left as it was",
    );
    t.equal(a.miniBatchSeed, deriveSeed(5, 'minibatch', 0));
    t.equal(a.step, 0);
  },
);

t.test('a resumed learner starts from the given categories: previousCategory and shifts', async (t) => {
  const requests: TrainRequest[] = [];
  const machine = learnerMachine.provide({
    actors: {
      train: fromPromise<TrainResult, TrainRequest>(async ({ input }) => {
        requests.push(input);
        return { version: input.policyVersion + 1, metrics: {} };
      }),
    },
  });
  const initialLastCategory = { A: 'efficiency', B: 'efficiency' } as const;
  const actor = createActor(machine, { input: learnerInput({ initialLastCategory }) });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  actor.start();
  for (const g of groups().slice(0, 3)) actor.send({ type: 'group.completed', group: g });
  await waitFor(actor, (s) => s.context.version === 1);
  const labeled = facts.filter(
    (f): f is Extract<LearnerFact, { type: 'boundary.labeled' }> => f.type === 'boundary.labeled',
  );
  t.strictSame(
    Object.fromEntries(labeled.map((f) => [f.label.questionId, [f.previousCategory, f.label.category]])),
    {
      A: ['efficiency', 'tool-dependent'],
      B: ['efficiency', 'efficiency'],
      C: [null, 'both-wrong'],
    },
  );
  const step = facts.find((f) => f.type === 'learner.step') as Extract<LearnerFact, { type: 'learner.step' }>;
  t.equal(step.stepMetrics.boundaryShifts, 1, 'A moved; B stayed; C is new');
  t.equal(step.miniBatchSeed, deriveSeed(5, 'minibatch', 0));
  t.equal(actor.getSnapshot().context.stepsDone, 1);
  t.strictSame(initialLastCategory, { A: 'efficiency', B: 'efficiency' }, 'the input is not changed');
  t.strictSame(actor.getSnapshot().context.lastCategory, {
    A: 'tool-dependent',
    B: 'efficiency',
    C: 'both-wrong',
  });
});

t.test('the learner without a train actor fails with a message saying what to provide', async (t) => {
  const actor = createActor(learnerMachine, { input: learnerInput({ batchQuestions: 1 }) });
  const failed = new Promise<unknown>((resolve) => actor.subscribe({ error: resolve }));
  actor.start();
  actor.send({ type: 'group.completed', group: groups()[0] });
  t.match(await failed, { message: 'learner machine: provide a `train` actor (the trainer service)' });
});

t.test('the wrong published version: PolicyVersionError says which was expected', async (t) => {
  const machine = learnerMachine.provide({
    actors: { train: fromPromise<TrainResult, TrainRequest>(async () => ({ version: 7, metrics: {} })) },
  });
  const actor = createActor(machine, { input: learnerInput({ batchQuestions: 1 }) });
  const failed = new Promise<unknown>((resolve) => actor.subscribe({ error: resolve }));
  actor.start();
  actor.send({ type: 'group.completed', group: groups()[0] });
  t.match(await failed, {
    name: 'PolicyVersionError',
    message: "learner: the trainer published version 7, expected 1 (one past the batch's rollout version)",
  });
});

t.test('the run waits for exactly the next version: another one is ignored', async (t) => {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const machine = runMachine.provide({
    actors: {
      question: questionMachine.provide({
        actors: {
          rollout: rolloutMachine.provide({
            actors: {
              generate: scriptedGenerate(tok, calls, () => '<answer> x </answer>'),
              callTool: fakeSearch(tok, calls),
            },
          }),
        },
      }),
      // The trainer never answers: the run's own guard is what is tested.
      learner: learnerMachine.provide({
        actors: { train: fromPromise<TrainResult, TrainRequest>(() => new Promise(() => {})) },
      }),
    },
  });
  const input: RunInput = {
    runSeed: 1,
    steps: 3,
    questions: [{ id: 'a', gold: ['x'], withToolPrompt: [1], noToolPrompt: [2] }],
    batchQuestions: 1,
    gWithTool: 1,
    gNoTool: 1,
    limits: { maxToolCalls: 1, maxResponseTokens: 8 },
    learner: learnerInput({ batchQuestions: 1 }) as RunInput['learner'],
  };
  const actor = createActor(machine, { input });
  actor.start();
  // Step 0's question has finished and step 1 waits for version 1 (maxStaleness 0).
  await waitFor(actor, (s) => s.context.pending.length === 0);
  actor.send({ type: 'policy.published', version: 2, step: 0 });
  actor.send({ type: 'policy.published', version: 0, step: 0 });
  t.equal(actor.getSnapshot().context.trainStep, 0, 'versions 2 and 0 are not the next one (1)');
  t.equal(actor.getSnapshot().context.policyVersion, 0);
  t.equal(actor.getSnapshot().value, 'running');
  actor.send({ type: 'policy.published', version: 1, step: 0 });
  t.equal(actor.getSnapshot().context.trainStep, 1);
  t.equal(actor.getSnapshot().context.policyVersion, 1);
  actor.stop();
});

function rolloutInput(over: Partial<RolloutInput> = {}): RolloutInput {
  return {
    step: 0,
    questionId: 'q1',
    rolloutId: 's0.q1.wt0',
    index: 0,
    path: 'with-tool',
    policyVersion: 0,
    promptTokens: [9],
    gold: ['y'],
    seed: 1,
    limits: { maxToolCalls: 1, maxResponseTokens: 20 },
    ...over,
  };
}

/** A generate actor playing fixed results turn by turn (text tokenized by the toy tokenizer). */
function playing(results: Array<{ text: string; finish: GenerateResult['finish']; pad?: number }>) {
  const tok = new ToyTokenizer();
  const requests: GenerateRequest[] = [];
  const generate = fromPromise<GenerateResult, GenerateRequest>(async ({ input }) => {
    requests.push(input);
    const r = results[input.turn];
    const tokens = [...tok.encode(r.text), ...Array(r.pad ?? 0).fill(1)];
    const call = r.pad ? {} : toyCallSpan(tok, tokens);
    return { tokens, logprobs: tokens.map(() => -0.5), text: r.text, finish: r.finish, ...call };
  });
  return { tok, requests, generate };
}

async function finish(machineInput: RolloutInput, generate: ReturnType<typeof playing>['generate']) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const machine = rolloutMachine.provide({ actors: { generate, callTool: fakeSearch(tok, calls) } });
  const actor = createActor(machine, { input: machineInput });
  actor.start();
  return { result: await toPromise(actor), calls };
}

t.test(
  'length: a decoder that stops on its own limit, and a turn that exactly fills the budget',
  async (t) => {
    // The decoder says 'length' with room left: still 'length', not 'eos'.
    const own = playing([{ text: '<think> a </think>', finish: 'length' }]);
    t.equal((await finish(rolloutInput(), own.generate)).result.stopReason, 'length');
    // A plain turn ('stop_string') of exactly the 20 tokens left: 'length'.
    const full = playing([{ text: '<think> a </think>', finish: 'stop_string', pad: 0 }]);
    const fill = await finish(
      rolloutInput({ limits: { maxToolCalls: 1, maxResponseTokens: 3 } }),
      full.generate,
    );
    t.strictSame([fill.result.stopReason, fill.result.responseTokens.length], ['length', 3]);
    // One token short of the budget: 'eos'.
    const short = playing([{ text: '<think> a </think>', finish: 'stop_string' }]);
    const s = await finish(
      rolloutInput({ limits: { maxToolCalls: 1, maxResponseTokens: 4 } }),
      short.generate,
    );
    t.equal(s.result.stopReason, 'eos');
  },
);

t.test('no budget at all: done on length without asking the policy', async (t) => {
  const g = playing([{ text: '<answer> y </answer>', finish: 'stop_string' }]);
  const r = await finish(rolloutInput({ limits: { maxToolCalls: 1, maxResponseTokens: 0 } }), g.generate);
  t.strictSame([r.result.stopReason, r.result.turns, g.requests.length], ['length', 0, 0]);
});

t.test('past the tool limit, a malformed turn is invalid-action, not tool-limit', async (t) => {
  const g = playing([
    { text: '<search> a </search>', finish: 'stop_string' },
    { text: 'junk <search> b </search>', finish: 'stop_string' },
  ]);
  const r = await finish(rolloutInput({ limits: { maxToolCalls: 1, maxResponseTokens: 60 } }), g.generate);
  t.strictSame([r.result.stopReason, r.result.toolCalls, r.calls.search.length], ['invalid-action', 1, 1]);
});

t.test('custom tool tags: the rollout calls the tool by its tag', async (t) => {
  const g = playing([
    { text: '<calc> 1 + 1 </calc>', finish: 'stop_string' },
    { text: '<answer> y </answer>', finish: 'stop_string' },
  ]);
  const r = await finish(
    rolloutInput({ limits: { toolTags: ['calc'], maxToolCalls: 1, maxResponseTokens: 60 } }),
    g.generate,
  );
  t.strictSame(
    [r.result.stopReason, r.result.reward, r.calls.search.map((c) => [c.tag, c.query])],
    ['answer', 1, [['calc', '1 + 1']]],
  );
  // With the default tags a <calc> block is not a tool call.
  const d = playing([{ text: '<calc> 1 + 1 </calc>', finish: 'stop_string' }]);
  t.equal((await finish(rolloutInput(), d.generate)).result.stopReason, 'invalid-action');
});

t.test('the rollout machine without its actors says which to provide', async (t) => {
  const a = createActor(rolloutMachine, { input: rolloutInput() });
  a.start();
  await t.rejects(toPromise(a), {
    message: 'rollout machine: provide a `generate` actor (the policy service)',
  });
  const g = playing([{ text: '<search> a </search>', finish: 'stop_string' }]);
  const b = createActor(rolloutMachine.provide({ actors: { generate: g.generate } }), {
    input: rolloutInput(),
  });
  b.start();
  await t.rejects(toPromise(b), {
    message: 'rollout machine: provide a `callTool` actor (the tools, src/tools)',
  });
});

t.test('question: both paths sorted by index whatever order they finish in; the cause kept', async (t) => {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  // Higher indices finish first.
  const generate = fromPromise<GenerateResult, GenerateRequest>(async ({ input }) => {
    const i = Number(input.rolloutId.slice(-1));
    await new Promise((r) => setTimeout(r, (3 - i) * 15));
    const tokens = tok.encode('<answer> y </answer>');
    return { tokens, logprobs: tokens.map(() => 0), text: '<answer> y </answer>', finish: 'stop_string' };
  });
  const machine = questionMachine.provide({
    actors: { rollout: rolloutMachine.provide({ actors: { generate, callTool: fakeSearch(tok, calls) } }) },
  });
  const input: QuestionInput = {
    runSeed: 1,
    step: 0,
    policyVersion: 0,
    question: { id: 'q', gold: ['y'], withToolPrompt: [1], noToolPrompt: [2] },
    gWithTool: 3,
    gNoTool: 3,
    limits: { maxToolCalls: 1, maxResponseTokens: 20 },
  };
  const actor = createActor(machine, { input });
  const done: string[] = [];
  actor.on('*', (f) => {
    if ((f as AkbeFact).type === 'rollout.completed')
      done.push((f as Extract<AkbeFact, { type: 'rollout.completed' }>).result.rolloutId);
  });
  actor.start();
  const g = await toPromise(actor);
  t.not(done[0].slice(-1), '0', `finished out of order: ${done.join(' ')}`);
  t.strictSame(
    g.withTool.map((r) => r.index),
    [0, 1, 2],
  );
  t.strictSame(
    g.noTool.map((r) => r.index),
    [0, 1, 2],
  );
  t.ok(g.noTool.every((r) => r.path === 'no-tool'));

  const broken = questionMachine.provide({
    actors: {
      rollout: rolloutMachine.provide({
        actors: {
          generate: fromPromise<GenerateResult, GenerateRequest>(async () => {
            throw new Error('policy down');
          }),
        },
      }),
    },
  });
  const b = createActor(broken, { input: { ...input, gNoTool: 0, gWithTool: 1 } });
  b.start();
  await t.rejects(toPromise(b), { name: 'QuestionRolloutError', cause: { message: 'policy down' } });
});
