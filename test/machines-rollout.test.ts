import t from 'tap';
import { createActor, fromPromise, toPromise } from 'xstate';
import type { AkbeFact } from '../src/machines/facts.js';
import {
  type GenerateRequest,
  type GenerateResult,
  type RolloutInput,
  rolloutMachine,
} from '../src/machines/rollout.js';
import { fakeSearch, type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './helpers/scripted-policy.js';

function setupRollout(turns: Array<string | null>, input: Partial<RolloutInput> = {}) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const machine = rolloutMachine.provide({
    actors: {
      generate: scriptedGenerate(tok, calls, (req) => turns[req.turn] ?? null),
      callTool: fakeSearch(tok, calls),
    },
  });
  const full: RolloutInput = {
    step: 0,
    questionId: 'q1',
    rolloutId: 'q1.wt.0',
    index: 0,
    path: 'with-tool',
    policyVersion: 3,
    promptTokens: tok.encode('question : who ? <prompt-end>'),
    gold: ['Seth Klarman'],
    seed: 42,
    limits: { maxToolCalls: 2, maxResponseTokens: 200 },
    ...input,
  };
  const actor = createActor(machine, { input: full });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  return { tok, calls, actor, facts, input: full };
}

t.test('search, observe, answer: masks 0 on observation tokens, reward 1, facts emitted', async (t) => {
  const { actor, calls, facts, tok } = setupRollout([
    '<think> need search </think> <search> baupost founder </search>',
    '<think> found </think> <answer> Seth Klarman </answer>',
  ]);
  actor.start();
  const r = await toPromise(actor);
  t.equal(r.stopReason, 'answer');
  t.equal(r.formatOk, true);
  t.equal(r.reward, 1);
  t.equal(r.toolCalls, 1);
  t.equal(r.turns, 2);
  t.equal(r.answer, 'Seth Klarman');
  t.equal(r.policyVersion, 3);
  const obs = tok.encode('<information> Doc 1(Title: baupost_founder) passage </information>');
  const first = tok.encode('<think> need search </think> <search> baupost founder </search>');
  t.same(
    r.responseMask,
    [...first.map(() => 1), ...obs.map(() => 0), ...Array(9).fill(1)].slice(0, r.responseTokens.length),
  );
  t.same(r.responseTokens.slice(first.length, first.length + obs.length), obs);
  t.ok(r.responseLogprobs.slice(first.length, first.length + obs.length).every((x) => x === 0));
  t.equal(calls.search[0].query, 'baupost founder');
  t.same(
    calls.generate[1].tokens.length,
    r.promptTokens.length + first.length + obs.length,
    'turn 2 sees prompt + turn 1 + observation',
  );
  t.same(
    facts.map((f) => f.type),
    ['rollout.started', 'rollout.turn', 'tool.called', 'rollout.turn', 'rollout.completed'],
  );
  t.not(calls.generate[0].seed, calls.generate[1].seed, 'each turn samples with its own derived seed');
});

t.test('the tool-call limit ends the rollout without running the extra search', async (t) => {
  const s = '<search> again </search>';
  const { actor, calls } = setupRollout([s, s, s, '<answer> x </answer>'], {
    limits: { maxToolCalls: 2, maxResponseTokens: 500 },
  });
  actor.start();
  const r = await toPromise(actor);
  t.equal(r.stopReason, 'tool-limit');
  t.equal(r.toolCalls, 2);
  t.equal(calls.search.length, 2);
  t.equal(calls.generate.length, 3);
  t.equal(r.formatOk, false);
  t.equal(r.reward, 0);
});

t.test('an invalid action is a format failure with reward 0, not an error', async (t) => {
  for (const [turns, path, reason] of [
    [['I will just say things <answer> Seth Klarman </answer>'], 'with-tool', 'invalid-action'],
    [['<search> q </search>'], 'no-tool', 'invalid-action'],
    [
      ['<search> q </search> <information> forged </information> <answer> Seth Klarman </answer>'],
      'with-tool',
      'invalid-action',
    ],
    [[null], 'with-tool', 'eos'],
  ] as const) {
    const { actor, calls } = setupRollout([...turns], { path });
    actor.start();
    const r = await toPromise(actor);
    t.equal(r.stopReason, reason, turns[0] ?? 'EOS');
    t.equal(r.formatOk, false);
    t.equal(r.reward, 0);
    t.equal(calls.search.length, 0);
  }
});

t.test('the length limit counts observation tokens and truncates generation', async (t) => {
  const { actor, calls } = setupRollout(
    ['<search> a b c </search>', '<think> long long long long long long </think> <answer> x </answer>'],
    {
      limits: { maxToolCalls: 3, maxResponseTokens: 16 },
    },
  );
  actor.start();
  const r = await toPromise(actor);
  t.equal(r.stopReason, 'length');
  t.equal(r.responseTokens.length, 16);
  t.equal(
    calls.generate[1].maxNewTokens,
    16 - 5 - 6,
    'budget left after 5 generated and 6 observation tokens',
  );
  t.equal(r.reward, 0);
});

t.test('a generator that breaks its contract is an error', async (t) => {
  const machine = rolloutMachine.provide({
    actors: {
      generate: fromPromise<GenerateResult, GenerateRequest>(async () => ({
        tokens: [1, 2],
        logprobs: [0],
        text: 'x',
        finish: 'stop_string',
      })),
    },
  });
  const { input } = setupRollout([]);
  const actor = createActor(machine, { input });
  actor.start();
  await t.rejects(toPromise(actor), { name: 'RolloutProtocolError' });
});

t.test('driveToOutput runs a rollout to its result, delivers its facts, and aborts on signal', async (t) => {
  const { driveToOutput } = await import('./helpers/drive.js');
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const machine = rolloutMachine.provide({
    actors: {
      generate: scriptedGenerate(tok, calls, () => '<answer> Seth Klarman </answer>'),
      callTool: fakeSearch(tok, calls),
    },
  });
  const { input } = setupRollout([]);
  const facts: string[] = [];
  const r = await driveToOutput(machine, input, { onFact: (f) => facts.push(f.type) });
  t.equal(r.reward, 1);
  t.same(facts, ['rollout.started', 'rollout.turn', 'rollout.completed']);
  const hanging = rolloutMachine.provide({
    actors: { generate: fromPromise<GenerateResult, GenerateRequest>(() => new Promise(() => {})) },
  });
  const ac = new AbortController();
  const p = driveToOutput(hanging, input, { signal: ac.signal });
  ac.abort();
  await t.rejects(p, { name: 'MachineAbortedError' });
});
