/**
 * The machines' small rules with exact expected values (issue 16, mutation testing): rollout ids
 * and inputs, the facts' fields and their defaults, the requests the rollout machine sends, the
 * selection rule, and a run resumed mid-way. The main behaviour tests are machines-{rollout,
 * question,learner,run}.test.ts; these pin what they leave loose.
 */
import t from 'tap';
import { createActor, fromPromise, toPromise } from 'xstate';
import type { AkbeFact } from '../src/machines/facts.js';
import {
  learnerMachine,
  selectionRuleOf,
  type TrainRequest,
  type TrainResult,
} from '../src/machines/learner.js';
import {
  type QuestionInput,
  questionMachine,
  rolloutIdOf,
  rolloutIdUnder,
  rolloutInputs,
} from '../src/machines/question.js';
import {
  type GenerateRequest,
  type GenerateResult,
  type RolloutInput,
  rolloutMachine,
  type ToolRequest,
  type ToolResult,
} from '../src/machines/rollout.js';
import { type RunInput, runMachine, sampleStepQuestions } from '../src/machines/run.js';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';
import type { BoundaryLabel } from '../src/rl/types.js';
import { deriveSeed } from '../src/util/rng.js';
import { fakeSearch, type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './helpers/scripted-policy.js';

const limits = { maxToolCalls: 2, maxResponseTokens: 40 };

function questionInput(over: Partial<QuestionInput> = {}): QuestionInput {
  return {
    runSeed: 7,
    step: 2,
    policyVersion: 2,
    question: { id: 'q9', gold: ['Paris'], withToolPrompt: [1, 2], noToolPrompt: [3] },
    gWithTool: 2,
    gNoTool: 1,
    limits,
    ...over,
  };
}

t.test('rollout ids and inputs: with-tool first, each with its prompt, index and seed', async (t) => {
  t.equal(rolloutIdOf(4, 'q1', 'with-tool', 0), 's4.q1.wt0');
  t.equal(rolloutIdOf(0, 'abc', 'no-tool', 12), 's0.abc.nt12');
  t.equal(rolloutIdUnder('eval', 'abc', 'with-tool', 3), 'eval.abc.wt3', "an evaluation's prefix");
  const sampling = { temperature: 0.7, topP: 0.9 };
  const inputs = rolloutInputs(questionInput({ sampling }));
  t.strictSame(
    inputs.map((i) => [i.rolloutId, i.path, i.index, i.promptTokens]),
    [
      ['s2.q9.wt0', 'with-tool', 0, [1, 2]],
      ['s2.q9.wt1', 'with-tool', 1, [1, 2]],
      ['s2.q9.nt0', 'no-tool', 0, [3]],
    ],
  );
  t.strictSame(
    inputs.map((i) => i.seed),
    [
      deriveSeed(7, 'rollout', 2, 'q9', 'with-tool', 0),
      deriveSeed(7, 'rollout', 2, 'q9', 'with-tool', 1),
      deriveSeed(7, 'rollout', 2, 'q9', 'no-tool', 0),
    ],
  );
  t.equal(new Set(inputs.map((i) => i.seed)).size, 3);
  for (const i of inputs) {
    t.equal(i.questionId, 'q9');
    t.equal(i.policyVersion, 2);
    t.strictSame(i.gold, ['Paris']);
    t.equal(i.limits, limits);
    t.equal(i.sampling, sampling);
  }
  t.strictSame(rolloutInputs(questionInput({ gWithTool: 0, gNoTool: 0 })), []);
});

/** A question machine whose rollouts answer at once (no tool). */
function answeringQuestion(input: QuestionInput) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const machine = questionMachine.provide({
    actors: {
      rollout: rolloutMachine.provide({
        actors: {
          generate: scriptedGenerate(tok, calls, () => '<answer> Paris </answer>'),
          callTool: fakeSearch(tok, calls),
        },
      }),
    },
  });
  const actor = createActor(machine, { input });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  return { actor, facts };
}

t.test(
  'question.assigned: the text and split default to the id and train; the oracle only when known',
  async (t) => {
    const plain = answeringQuestion(questionInput());
    plain.actor.start();
    const group = await toPromise(plain.actor);
    t.strictSame(plain.facts[0], {
      type: 'question.assigned',
      questionId: 'q9',
      step: 2,
      policyVersion: 2,
      text: 'q9',
      gold: ['Paris'],
      split: 'train',
      groupSize: { withTool: 2, noTool: 1 },
    });
    t.notOk('known' in plain.facts[0], 'no oracle: no key');
    t.strictSame(
      [group.questionId, group.step, group.policyVersion, group.gold, group.withToolPrompt],
      ['q9', 2, 2, ['Paris'], [1, 2]],
    );
    t.strictSame(
      group.withTool.map((r) => r.rolloutId),
      ['s2.q9.wt0', 's2.q9.wt1'],
    );
    t.strictSame(
      group.noTool.map((r) => r.rolloutId),
      ['s2.q9.nt0'],
    );

    for (const known of [true, false]) {
      const q = questionInput();
      const given = answeringQuestion({
        ...q,
        question: { ...q.question, text: 'Capital?', split: 'multi-hop', known },
      });
      given.actor.start();
      await toPromise(given.actor);
      const f = given.facts[0] as Extract<AkbeFact, { type: 'question.assigned' }>;
      t.strictSame([f.text, f.split, f.known], ['Capital?', 'multi-hop', known]);
    }
  },
);

t.test('a failed rollout names the question and the rollout', async (t) => {
  const machine = questionMachine.provide({
    actors: {
      rollout: rolloutMachine.provide({
        actors: {
          generate: fromPromise<GenerateResult, GenerateRequest>(async () => {
            throw new Error('down');
          }),
        },
      }),
    },
  });
  const actor = createActor(machine, { input: questionInput({ gWithTool: 1, gNoTool: 0 }) });
  actor.start();
  await t.rejects(toPromise(actor), {
    name: 'QuestionRolloutError',
    message: 'question q9: rollout s2.q9.wt0 failed',
    questionId: 'q9',
    rolloutId: 's2.q9.wt0',
  });
});

t.test(
  'selectionRuleOf: none without a target, the config rule for tool-dependent, else random',
  async (t) => {
    const label = (category: BoundaryLabel['category'], target: boolean) =>
      ({ category, target: target ? { rolloutId: 'x' } : null }) as unknown as BoundaryLabel;
    t.equal(selectionRuleOf(label('both-wrong', false), 'min-tool-calls'), 'none');
    t.equal(selectionRuleOf(label('tool-dependent', false), 'min-tool-calls'), 'none');
    t.equal(selectionRuleOf(label('tool-dependent', true), 'shortest'), 'shortest');
    t.equal(selectionRuleOf(label('tool-dependent', true), 'min-tool-calls'), 'min-tool-calls');
    t.equal(selectionRuleOf(label('efficiency', true), 'shortest'), 'random-correct-no-tool');
    t.equal(selectionRuleOf(label('hallucination', true), 'shortest'), 'random-correct-no-tool');
  },
);

function rolloutInput(over: Partial<RolloutInput> = {}): RolloutInput {
  return {
    step: 0,
    questionId: 'q1',
    rolloutId: 's0.q1.wt0',
    index: 0,
    path: 'with-tool',
    policyVersion: 5,
    promptTokens: [9, 9, 9],
    gold: ['Seth Klarman'],
    seed: 42,
    limits: { maxToolCalls: 2, maxResponseTokens: 30 },
    ...over,
  };
}

function scriptedRollout(turns: string[], tool?: (req: ToolRequest) => Partial<ToolResult>) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const search = fakeSearch(tok, calls);
  const callTool = tool
    ? fromPromise<ToolResult, ToolRequest>(async ({ input }) => {
        calls.search.push(input);
        const text = '<information> doc </information>';
        return { tool: 'search', tokens: tok.encode(text), text, ...tool(input) };
      })
    : search;
  const machine = rolloutMachine.provide({
    actors: { generate: scriptedGenerate(tok, calls, (req) => turns[req.turn] ?? null), callTool },
  });
  return { machine, calls, tok };
}

t.test('generate requests: the context, the budget, per-turn seeds, sampling defaults 1 / 1', async (t) => {
  const { machine, calls, tok } = scriptedRollout([
    '<search> who </search>',
    '<answer> Seth Klarman </answer>',
  ]);
  // A step of its own (not 0), so a fact that took its step from anywhere but the input shows.
  const actor = createActor(machine, { input: rolloutInput({ step: 3 }) });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  actor.start();
  const r = await toPromise(actor);
  const [g0, g1] = calls.generate;
  t.strictSame(
    { ...g0, tokens: g0.tokens },
    {
      rolloutId: 's0.q1.wt0',
      questionId: 'q1',
      path: 'with-tool',
      policyVersion: 5,
      tokens: [9, 9, 9],
      maxNewTokens: 30,
      seed: deriveSeed(42, 'turn', 0),
      turn: 0,
      temperature: 1,
      topP: 1,
    },
  );
  const obs = tok.encode('<information> Doc 1(Title: who) passage </information>');
  t.equal(g1.turn, 1);
  t.equal(g1.seed, deriveSeed(42, 'turn', 1));
  t.equal(g1.maxNewTokens, 30 - 3 - obs.length, 'the budget less 3 generated and the observation');
  t.strictSame(g1.tokens, [9, 9, 9, ...r.responseTokens.slice(0, 3 + obs.length)]);
  // The search request: the tag, the stripped query, 1-based call, the turn that asked for it.
  t.strictSame(calls.search[0], {
    rolloutId: 's0.q1.wt0',
    questionId: 'q1',
    tag: 'search',
    query: 'who',
    call: 1,
    turn: 0,
  });
  // Facts: the turns with their seeds and actions; the call with the defaults of a bare tool reply.
  const turns = facts.filter((f) => f.type === 'rollout.turn');
  t.strictSame(
    turns.map((f) => [f.turn, f.seed, f.action, f.tokenIds.length, f.policyVersion, f.rolloutId]),
    [
      [0, deriveSeed(42, 'turn', 0), 'search', 3, 5, 's0.q1.wt0'],
      [1, deriveSeed(42, 'turn', 1), 'answer', 4, 5, 's0.q1.wt0'],
    ],
  );
  const called = facts.find((f) => f.type === 'tool.called');
  t.strictSame(called, {
    type: 'tool.called',
    step: 3,
    tool: 'search',
    questionId: 'q1',
    rolloutId: 's0.q1.wt0',
    policyVersion: 5,
    turn: 0,
    call: 1,
    query: 'who',
    observationTokenIds: obs,
    record: { passageIds: ['p1'], scores: [0.5] },
    latencyMs: 0,
    error: null,
  });
  t.strictSame(facts[0], {
    type: 'rollout.started',
    step: 3,
    questionId: 'q1',
    rolloutId: 's0.q1.wt0',
    path: 'with-tool',
    index: 0,
    seed: 42,
    policyVersion: 5,
  });
  t.strictSame(
    [r.stopReason, r.formatOk, r.formatReason, r.em, r.reward, r.turns, r.toolCalls, r.seed, r.index],
    ['answer', true, 'ok', 1, 1, 2, 1, 42, 0],
  );
  t.strictSame(
    r.responseLogprobs.slice(3, 3 + obs.length),
    obs.map(() => 0),
  );
  t.strictSame(
    r.segments.map((s) => s.kind),
    ['generated', 'observation', 'generated'],
  );
});

t.test(
  'given sampling and a tool reply with record, latency and error reach the request and the fact',
  async (t) => {
    const { machine, calls } = scriptedRollout(['<search> x </search>', '<answer> no </answer>'], () => ({
      tool: 'calc',
      latencyMs: 12.5,
      error: 'timeout',
      record: { n: 1 },
    }));
    const actor = createActor(machine, {
      input: rolloutInput({ sampling: { temperature: 0.3, topP: 0.8 } }),
    });
    const facts: AkbeFact[] = [];
    actor.on('*', (f) => facts.push(f as AkbeFact));
    actor.start();
    const r = await toPromise(actor);
    t.strictSame(
      calls.generate.map((g) => [g.temperature, g.topP]),
      [
        [0.3, 0.8],
        [0.3, 0.8],
      ],
    );
    const called = facts.find((f) => f.type === 'tool.called') as Extract<AkbeFact, { type: 'tool.called' }>;
    t.strictSame(
      [called.tool, called.latencyMs, called.error, called.record],
      ['calc', 12.5, 'timeout', { n: 1 }],
    );
    t.strictSame(
      [r.stopReason, r.formatOk, r.formatReason, r.em, r.reward],
      ['answer', true, 'ok', 0, 0],
      'a wrong answer',
    );
  },
);

t.test(
  'stop reasons carry through: format reason = the stop, EM and reward 0, the turn action',
  async (t) => {
    // Two calls allowed, a third asked: tool-limit (the refused call's turn is a search action).
    const s = '<search> q </search>';
    const lim = scriptedRollout([s, s, s]);
    const a = createActor(lim.machine, {
      input: rolloutInput({ limits: { maxToolCalls: 2, maxResponseTokens: 200 } }),
    });
    const facts: AkbeFact[] = [];
    a.on('*', (f) => facts.push(f as AkbeFact));
    a.start();
    const r = await toPromise(a);
    t.strictSame(
      [r.stopReason, r.formatReason, r.formatOk, r.em, r.reward],
      ['tool-limit', 'tool-limit', false, 0, 0],
    );
    t.strictSame(
      facts.filter((f) => f.type === 'rollout.turn').map((f) => f.action),
      ['search', 'search', 'search'],
    );
    // Text outside blocks: invalid-action, the turn's action 'invalid'.
    const bad = scriptedRollout(['hello <answer> Seth Klarman </answer>']);
    const b = createActor(bad.machine, { input: rolloutInput() });
    const bf: AkbeFact[] = [];
    b.on('*', (f) => bf.push(f as AkbeFact));
    b.start();
    const rb = await toPromise(b);
    t.strictSame(
      [rb.stopReason, rb.formatReason, rb.em, rb.reward],
      ['invalid-action', 'invalid-action', 0, 0],
    );
    t.strictSame(
      bf.filter((f) => f.type === 'rollout.turn').map((f) => f.action),
      ['invalid'],
    );
    // A turn that ends without an action (a think block only): 'eos', the action 'think'.
    const eos = scriptedRollout(['<think> hmm </think>']);
    const c = createActor(eos.machine, { input: rolloutInput() });
    const cf: AkbeFact[] = [];
    c.on('*', (f) => cf.push(f as AkbeFact));
    c.start();
    const rc = await toPromise(c);
    t.strictSame([rc.stopReason, rc.formatReason, rc.turns], ['eos', 'eos', 1]);
    t.strictSame(
      cf.filter((f) => f.type === 'rollout.turn').map((f) => f.action),
      ['think'],
    );
    // A turn cut by the budget: 'length' (generated tokens exactly fill it).
    const long = scriptedRollout(['<think> a b c d e f g h </think>']);
    const d = createActor(long.machine, {
      input: rolloutInput({ limits: { maxToolCalls: 2, maxResponseTokens: 4 } }),
    });
    d.start();
    const rd = await toPromise(d);
    t.strictSame([rd.stopReason, rd.responseTokens.length, rd.turns], ['length', 4, 1]);
  },
);

t.test('a generator returning more tokens than asked is a protocol error with the counts', async (t) => {
  const machine = rolloutMachine.provide({
    actors: {
      generate: fromPromise<GenerateResult, GenerateRequest>(async () => ({
        tokens: [1, 2, 3, 4],
        logprobs: [0, 0, 0, 0],
        text: 'x',
        finish: 'stop_string' as const,
      })),
    },
  });
  const actor = createActor(machine, {
    input: rolloutInput({ limits: { maxToolCalls: 1, maxResponseTokens: 3 } }),
  });
  actor.start();
  await t.rejects(toPromise(actor), {
    name: 'RolloutProtocolError',
    rolloutId: 's0.q1.wt0',
    message: 'generate returned 4 tokens, more than the 3 asked for',
  });
  const uneven = rolloutMachine.provide({
    actors: {
      generate: fromPromise<GenerateResult, GenerateRequest>(async () => ({
        tokens: [1, 2],
        logprobs: [0],
        text: 'x',
        finish: 'stop_string' as const,
      })),
    },
  });
  const u = createActor(uneven, { input: rolloutInput() });
  u.start();
  await t.rejects(toPromise(u), { message: 'generate returned 2 tokens but 1 logprobs' });
});

t.test('an observation larger than the budget is cut and the rollout ends on length', async (t) => {
  const { machine, tok } = scriptedRollout(['<search> q </search>', '<answer> x </answer>']);
  const actor = createActor(machine, {
    input: rolloutInput({ limits: { maxToolCalls: 2, maxResponseTokens: 6 } }),
  });
  actor.start();
  const r = await toPromise(actor);
  const obs = tok.encode('<information> Doc 1(Title: q) passage </information>');
  t.ok(obs.length > 3, 'the observation alone is longer than the 3 tokens left');
  t.strictSame([r.stopReason, r.responseTokens.length, r.toolCalls], ['length', 6, 1]);
  t.strictSame(r.responseMask, [1, 1, 1, 0, 0, 0]);
  t.strictSame(r.responseTokens.slice(3), obs.slice(0, 3));
});

function runSetup(over: Partial<RunInput>) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const requests: TrainRequest[] = [];
  const machine = runMachine.provide({
    actors: {
      question: questionMachine.provide({
        actors: {
          rollout: rolloutMachine.provide({
            actors: {
              generate: scriptedGenerate(tok, calls, () => '<answer> paris </answer>'),
              callTool: fakeSearch(tok, calls),
            },
          }),
        },
      }),
      learner: learnerMachine.provide({
        actors: {
          train: fromPromise<TrainResult, TrainRequest>(async ({ input }) => {
            requests.push(input);
            return {
              version: input.policyVersion + 1,
              metrics: {},
              checkpoint: `ckpt-${input.policyVersion + 1}`,
            };
          }),
        },
      }),
    },
  });
  const input: RunInput = {
    runSeed: 3,
    steps: 4,
    questions: ['a', 'b', 'c'].map((id) => ({ id, gold: ['Paris'], withToolPrompt: [1], noToolPrompt: [2] })),
    batchQuestions: 2,
    gWithTool: 1,
    gNoTool: 1,
    limits: { maxToolCalls: 1, maxResponseTokens: 16 },
    learner: {
      miniBatchQuestions: 2,
      algo: 'akbe',
      advantage: 'grpo',
      targetSelection: 'min-tool-calls',
      targetContext: 'with-tool',
      losses: lossTermsFor(DEFAULT_TRAIN_CONFIG),
    },
    ...over,
  };
  const actor = createActor(machine, { input });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  return { actor, facts, calls, requests };
}

t.test('a resumed run starts at initialStep with initialVersion and runs the steps left', async (t) => {
  const { actor, facts, calls, requests } = runSetup({ initialStep: 2, initialVersion: 2 });
  actor.start();
  t.strictSame(await toPromise(actor), { steps: 4, policyVersion: 4 });
  const started = facts.filter((f) => f.type === 'step.started');
  t.strictSame(
    started.map((f) => [f.step, f.policyVersion, f.seed, f.questionIds]),
    [2, 3].map((k) => [
      k,
      k,
      deriveSeed(3, 'questions', k),
      sampleStepQuestions(3, 2, 3, k).map((i) => 'abc'[i]),
    ]),
  );
  t.strictSame(
    requests.map((r) => [r.step, r.policyVersion]),
    [
      [2, 2],
      [3, 3],
    ],
  );
  t.ok(
    calls.generate.every((g) => g.policyVersion === Number(g.rolloutId.slice(1, 2))),
    'step k rolls out with v k',
  );
  t.strictSame(
    facts.filter((f) => f.type === 'policy.published').map((f) => [f.step, f.version, f.checkpoint]),
    [
      [2, 3, 'ckpt-3'],
      [3, 4, 'ckpt-4'],
    ],
  );
  t.strictSame(facts.at(-1), { type: 'run.finished', steps: 4, policyVersion: 4 });
  t.strictSame(
    facts.filter((f) => f.type === 'learner.step').map((f) => [f.step, f.policyVersion, f.batch.rows]),
    [
      [2, 2, 2 + 2],
      [3, 3, 2 + 2],
    ],
    'each step: 2 with-tool rows and 2 re-conditioned no-tool targets (efficiency: both paths right)',
  );
});

t.test('a single-step run runs its step exactly once', async (t) => {
  const one = runSetup({ steps: 1 });
  one.actor.start();
  t.strictSame(await toPromise(one.actor), { steps: 1, policyVersion: 1 });
  t.equal(one.facts.filter((f) => f.type === 'step.started').length, 1);
  t.equal(one.requests.length, 1);
  t.strictSame(one.facts.at(-1), { type: 'run.finished', steps: 1, policyVersion: 1 });
});

t.test('sampleStepQuestions refuses a batch larger than the pool, naming both', async (t) => {
  t.throws(() => sampleStepQuestions(3, 4, 1, 0), {
    name: 'RangeError',
    message: 'a step needs 4 distinct questions but the pool has 3',
  });
  t.strictSame(sampleStepQuestions(3, 0, 1, 0), []);
  t.strictSame(sampleStepQuestions(1, 1, 1, 0), [0]);
});
