import t from 'tap';
import { createActor, fromPromise, toPromise } from 'xstate';
import type { AkbeFact } from '../src/machines/facts.js';
import { type QuestionInput, questionMachine } from '../src/machines/question.js';
import { type GenerateRequest, type GenerateResult, rolloutMachine } from '../src/machines/rollout.js';
import { fakeSearch, type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './helpers/scripted-policy.js';

function setup(gWithTool: number, gNoTool: number) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  // with-tool rollout i: even i search once then answer right; odd i answer wrong at once.
  // no-tool rollout i: only index 1 answers right.
  const generate = scriptedGenerate(tok, calls, (req) => {
    const i = Number(req.rolloutId.slice(req.rolloutId.lastIndexOf('t') + 1));
    if (req.path === 'no-tool')
      return `<think> recall </think> <answer> ${i === 1 ? 'Seth Klarman' : 'Warren Buffett'} </answer>`;
    if (i % 2 === 1) return '<answer> Warren Buffett </answer>';
    return req.turn === 0 ? '<search> baupost founder </search>' : '<answer> seth klarman </answer>';
  });
  const machine = questionMachine.provide({
    actors: { rollout: rolloutMachine.provide({ actors: { generate, callTool: fakeSearch(tok, calls) } }) },
  });
  const input: QuestionInput = {
    runSeed: 7,
    step: 2,
    policyVersion: 2,
    question: {
      id: 'q9',
      gold: ['Seth Klarman'],
      withToolPrompt: tok.encode('WT-PROMPT who founded baupost'),
      noToolPrompt: tok.encode('NT-PROMPT who founded baupost'),
    },
    gWithTool,
    gNoTool,
    limits: { maxToolCalls: 3, maxResponseTokens: 64 },
  };
  const actor = createActor(machine, { input });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  return { tok, calls, actor, facts, input };
}

t.test('fans out G_wt with-tool and G_nt no-tool rollouts at once, each with its path prompt', async (t) => {
  const { actor, calls, tok } = setup(5, 3);
  actor.start();
  // Both paths are spawned in the same step, before any generate call has resolved.
  t.equal(Object.keys(actor.getSnapshot().children).length, 8);
  t.equal(calls.generate.filter((c) => c.path === 'with-tool').length, 5);
  t.equal(calls.generate.filter((c) => c.path === 'no-tool').length, 3);
  for (const c of calls.generate)
    t.equal(tok.decode(c.tokens.slice(0, 1)), c.path === 'with-tool' ? 'WT-PROMPT' : 'NT-PROMPT');
  const group = await toPromise(actor);
  t.same(Object.keys(actor.getSnapshot().children), [], 'finished rollout actors are released');
  t.equal(group.withTool.length, 5);
  t.equal(group.noTool.length, 3);
  t.same(
    group.withTool.map((r) => r.index),
    [0, 1, 2, 3, 4],
  );
  t.same(
    group.withTool.map((r) => r.reward),
    [1, 0, 1, 0, 1],
  );
  t.same(
    group.withTool.map((r) => r.toolCalls),
    [1, 0, 1, 0, 1],
  );
  t.same(
    group.noTool.map((r) => r.reward),
    [0, 1, 0],
  );
  t.ok([...group.withTool, ...group.noTool].every((r) => r.policyVersion === 2));
  t.equal(
    new Set(calls.generate.map((c) => c.seed)).size,
    calls.generate.length,
    'every turn of every rollout has its own seed',
  );
});

t.test('relays every child fact and reports group.completed once', async (t) => {
  const { actor, facts } = setup(2, 2);
  actor.start();
  await toPromise(actor);
  const count = (type: string) => facts.filter((f) => f.type === type).length;
  t.equal(count('rollout.started'), 4);
  t.equal(count('rollout.completed'), 4);
  t.equal(count('tool.called'), 1);
  t.equal(count('group.completed'), 1);
  t.equal(facts[0].type, 'question.assigned');
  t.equal(facts.at(-1)?.type, 'group.completed');
});

t.test('a service failure fails the question with QuestionRolloutError', async (t) => {
  const { input } = setup(1, 1);
  const broken = questionMachine.provide({
    actors: {
      rollout: rolloutMachine.provide({
        actors: {
          generate: fromPromise<GenerateResult, GenerateRequest>(async () => {
            throw new Error('policy service down');
          }),
        },
      }),
    },
  });
  const actor = createActor(broken, { input });
  actor.start();
  await t.rejects(toPromise(actor), { name: 'QuestionRolloutError' });
});
