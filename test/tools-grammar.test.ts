/**
 * Tools are plugins: the grammar, the turn parser and the rollout machine know a tool only by its
 * tag, so a second tool (here a made-up `<calc>`) needs no change to any of them; its calls are
 * recorded under its own name. Old logs' tool.called (v1, search only) read back as v2.
 */
import { Packr } from 'msgpackr';
import t from 'tap';
import { createActor, fromPromise, toPromise } from 'xstate';
import { createEvent, type EventOf } from '../src/events/catalog.js';
import { CODEC_OPTIONS, decodeEvent } from '../src/events/codec.js';
import type { AkbeFact } from '../src/machines/facts.js';
import { rolloutMachine, type ToolRequest, type ToolResult } from '../src/machines/rollout.js';
import { checkFormat, parseTurn } from '../src/rl/format.js';
import { type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './helpers/scripted-policy.js';

const TAGS = ['search', 'calc'];

t.test('the grammar takes any tool tag it is given, and only those', async (t) => {
  const two = '<calc> 2 + 2 </calc> <information> 4 </information> <answer> 4 </answer>';
  t.same(checkFormat(two, 'with-tool', { maxToolCalls: 2, toolTags: TAGS }), { ok: true, reason: 'ok' });
  t.same(checkFormat(two, 'no-tool', { maxToolCalls: 2, toolTags: TAGS }), {
    ok: false,
    reason: 'search-in-no-tool',
  });
  t.same(checkFormat(two, 'with-tool', { maxToolCalls: 2 }), { ok: false, reason: 'text-outside-blocks' });
  const three = `${'<calc> 1 </calc> <information> 1 </information> '.repeat(2)}<search> x </search>`;
  t.same(
    checkFormat(`${three} <information> d </information> <answer> a </answer>`, 'with-tool', {
      maxToolCalls: 2,
      toolTags: TAGS,
    }),
    { ok: false, reason: 'too-many-searches' },
    'one limit over all tools',
  );
  t.same(parseTurn('<think> add </think> <calc> 2 + 2 </calc>', TAGS), { kind: 'calc', query: '2 + 2' });
  t.same(parseTurn('<calc> 2 + 2 </calc>'), { kind: 'none' }, 'not a tool of this run');
  t.throws(() => checkFormat('x', 'with-tool', { maxToolCalls: 1, toolTags: ['answer'] }), RangeError);
});

t.test('the rollout machine calls a second tool by its tag and records its name', async (t) => {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const turns = ['<calc> 6 * 7 </calc>', '<answer> 42 </answer>'];
  const asked: ToolRequest[] = [];
  const machine = rolloutMachine.provide({
    actors: {
      generate: scriptedGenerate(tok, calls, (req) => turns[req.turn] ?? null),
      callTool: fromPromise<ToolResult, ToolRequest>(async ({ input }) => {
        asked.push(input);
        const text = '<information> 42 </information>';
        return { tool: 'calculator', tokens: tok.encode(text), text, record: { value: 42 } };
      }),
    },
  });
  const actor = createActor(machine, {
    input: {
      step: 0,
      questionId: 'q1',
      rolloutId: 'q1.wt.0',
      index: 0,
      path: 'with-tool',
      policyVersion: 0,
      promptTokens: tok.encode('what is 6 * 7 ?'),
      gold: ['42'],
      seed: 1,
      limits: { maxToolCalls: 2, maxResponseTokens: 100, toolTags: TAGS },
    },
  });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  actor.start();
  const r = await toPromise(actor);
  t.same(
    asked.map((a) => [a.tag, a.query, a.call]),
    [['calc', '6 * 7', 1]],
  );
  t.same([r.stopReason, r.reward, r.toolCalls], ['answer', 1, 1]);
  const called = facts.find((f) => f.type === 'tool.called');
  t.has(called, { tool: 'calculator', query: '6 * 7', record: { value: 42 } });
});

t.test('a v1 tool.called (search only, passages inline) reads back as v2', async (t) => {
  const v2 = createEvent(
    'tool.called',
    {
      tool: 'search',
      turn: 0,
      query: 'q',
      record: {},
      observationTokenIds: Int32Array.from([5, 6]),
      latencyMs: 1,
      error: null,
    },
    { runId: 'r1', step: 0, policyVersion: 0, questionId: 'q1', rolloutId: 's0.q1.wt0' },
  );
  const { tool: _tool, record: _record, ...rest } = v2.data;
  const v1 = { ...v2, v: 1, data: { ...rest, passageIds: ['p1', 'p2'], scores: [0.5, 0.25] } };
  const read = decodeEvent(new Packr(CODEC_OPTIONS).pack(v1)) as EventOf<'tool.called'>;
  t.equal(read.v, 2);
  t.same(read.data.record, { passageIds: ['p1', 'p2'], scores: [0.5, 0.25] });
  t.equal(read.data.tool, 'search');
});
