/**
 * The rollout machine records each search decision's token span (the call's query) in response
 * coordinates, for executed calls and for the call the tool-call limit refused, and refuses a
 * generate actor whose span breaks the contract. The spans are counted by hand from the toy
 * tokenizer (one token per word) and from the world's tokenizer through the real `turnResult`.
 */
import t from 'tap';
import { createActor, fromPromise, toPromise } from 'xstate';
import { rolloutCompletedEvent } from '../src/actors/log/fact-events.js';
import { turnResult } from '../src/actors/rollout/rollout-actors.js';
import type { EventOf } from '../src/events/catalog.js';
import { decodeEvent, encodeEvent } from '../src/events/codec.js';
import {
  type GenerateRequest,
  type GenerateResult,
  type RolloutInput,
  rolloutMachine,
  type ToolRequest,
  type ToolResult,
} from '../src/machines/rollout.js';
import { worldEnvironment } from '../src/text/environment.js';
import { WorldTokenizer } from '../src/text/word-tokenizer.js';
import { fakeSearch, type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './helpers/scripted-policy.js';

function input(over: Partial<RolloutInput> = {}): RolloutInput {
  return {
    step: 0,
    questionId: 'q1',
    rolloutId: 'q1.wt.0',
    index: 0,
    path: 'with-tool',
    policyVersion: 0,
    promptTokens: [1, 2],
    gold: ['Seth Klarman'],
    seed: 7,
    limits: { maxToolCalls: 2, maxResponseTokens: 200 },
    ...over,
  };
}

async function runScripted(turns: string[], over: Partial<RolloutInput> = {}) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const machine = rolloutMachine.provide({
    actors: {
      generate: scriptedGenerate(tok, calls, (req) => turns[req.turn] ?? null),
      callTool: fakeSearch(tok, calls),
    },
  });
  const actor = createActor(machine, { input: input(over) });
  actor.start();
  return toPromise(actor);
}

const stored = (r: Parameters<typeof rolloutCompletedEvent>[2]) =>
  decodeEvent(encodeEvent(rolloutCompletedEvent('run1', 0, r))) as EventOf<'rollout.completed'>;

t.test('three turns, two searches: each query span in response coordinates', async (t) => {
  const r = await runScripted([
    // 0 <think> 1 a 2 b 3 </think> 4 <search> 5 q1 6 word 7 </search>
    '<think> a b </think> <search> q1 word </search>',
    // after the 6-token observation [8, 14): 14 <search> 15 q2 16 </search>
    '<search> q2 </search>',
    // after the next observation [17, 23): the answer, 23..26
    '<answer> Seth Klarman </answer>',
  ]);
  t.equal(r.stopReason, 'answer');
  t.equal(r.reward, 1);
  t.equal(r.toolCalls, 2);
  t.strictSame(
    r.responseMask.join(''),
    `${'1'.repeat(8)}${'0'.repeat(6)}111${'0'.repeat(6)}1111`,
    'the layout the spans are counted on',
  );
  t.strictSame(r.toolCallSpans, [
    [5, 7],
    [15, 16],
  ]);
  t.strictSame(stored(r).data.toolCallSpans, r.toolCallSpans, 'the event carries them and validates');
});

t.test('a call refused by the tool-call limit is a search decision too', async (t) => {
  const r = await runScripted(['<think> a b </think> <search> q1 word </search>', '<search> q2 </search>'], {
    limits: { maxToolCalls: 1, maxResponseTokens: 200 },
  });
  t.equal(r.stopReason, 'tool-limit');
  t.equal(r.toolCalls, 1, 'the refused call is not executed');
  t.strictSame(r.toolCallSpans, [
    [5, 7],
    [15, 16],
  ]);
  t.strictSame(stored(r).data.toolCallSpans, r.toolCallSpans);
});

t.test('no search, an empty search and a no-tool search record no span', async (t) => {
  t.strictSame((await runScripted(['<think> a </think> <answer> Seth Klarman </answer>'])).toolCallSpans, []);
  // An empty query is a format failure (invalid action), not a search decision that ran.
  const empty = await runScripted(['<search> </search>']);
  t.equal(empty.stopReason, 'invalid-action');
  t.strictSame(empty.toolCallSpans, []);
  const noTool = await runScripted(['<search> q </search>'], { path: 'no-tool' });
  t.equal(noTool.stopReason, 'invalid-action');
  t.strictSame(noTool.toolCallSpans, []);
});

/** A machine whose generate returns `turn` once (then EOS), with the observation search. */
function oneTurn(turn: Partial<GenerateResult> & { tokens: number[] }) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  return rolloutMachine.provide({
    actors: {
      generate: fromPromise<GenerateResult, GenerateRequest>(async ({ input }) =>
        input.turn === 0
          ? {
              logprobs: turn.tokens.map(() => -0.1),
              text: '<search> q </search>',
              finish: 'stop_string',
              ...turn,
            }
          : { tokens: [], logprobs: [], text: '', finish: 'stop_token' },
      ),
      callTool: fakeSearch(tok, calls),
    },
  });
}

t.test('a call span outside its turn, empty, or missing is a protocol error', async (t) => {
  const cases: Array<[[number, number] | undefined, RegExp]> = [
    [undefined, /^turn 0 ends in a tool call but generate returned no call span$/],
    [[1, 4], /^generate returned call span \[1,4\], not a non-empty range of its 3 tokens$/],
    [[2, 2], /call span \[2,2\]/],
    [[-1, 1], /call span \[-1,1\]/],
    [[0.5, 2], /call span \[0.5,2\]/],
    // The reply crosses a process boundary: a span must be a pair, and an array, not an array-like.
    [[0, 2, 3] as unknown as [number, number], /call span \[0,2,3\]/],
    [{ 0: 0, 1: 2, length: 2 } as unknown as [number, number], /call span \{"0":0,"1":2,"length":2\}/],
  ];
  for (const [callSpan, message] of cases) {
    const actor = createActor(oneTurn({ tokens: [10, 11, 12], ...(callSpan ? { callSpan } : {}) }), {
      input: input(),
    });
    actor.start();
    await t.rejects(toPromise(actor), { name: 'RolloutProtocolError', rolloutId: 'q1.wt.0', message });
  }
  // A span on a turn that is not a call is not a search decision: ignored.
  const answer = oneTurn({ tokens: [10, 11, 12], text: '<answer> x </answer>', callSpan: [0, 3] });
  const a = createActor(answer, { input: input() });
  a.start();
  t.strictSame((await toPromise(a)).toolCallSpans, []);
});

t.test("the world's generate actor (turnResult) finds the spans the machine records", async (t) => {
  const tok = await WorldTokenizer.load('assets/base/tokenizer.json');
  const env = worldEnvironment(tok);
  const turns = [
    // 0 <think> 1 Bank 2 Bridge 3 </think> 4 <search> 5 Crown 6 Bank 7 ? 8 </search>
    '<think> Bank Bridge </think> <search> Crown Bank ? </search>',
    // after the 10-token observation [9, 19): 19 <search> 20 Bridge 21 </search>
    '<search> Bridge </search>',
    '<answer> Bank </answer>',
  ];
  const generate = fromPromise<GenerateResult, GenerateRequest>(async ({ input: req }) => {
    const ids = tok.encode(turns[req.turn]);
    return turnResult(
      env,
      req,
      ids,
      ids.map(() => -0.1),
      false,
      ['search'],
    );
  });
  const callTool = fromPromise<ToolResult, ToolRequest>(async () => {
    const text = env.wrap('Doc 1(Title: Bank) Bank Bridge .');
    return { tool: 'search', tokens: env.encode(text), text };
  });
  t.equal(env.encode(env.wrap('Doc 1(Title: Bank) Bank Bridge .')).length, 10);
  const machine = rolloutMachine.provide({ actors: { generate, callTool } });
  const actor = createActor(machine, { input: input({ gold: ['Bank'] }) });
  actor.start();
  const r = await toPromise(actor);
  t.equal(r.reward, 1);
  t.strictSame(r.toolCallSpans, [
    [5, 8],
    [20, 21],
  ]);
  t.strictSame(
    r.toolCallSpans.map(([s, e]) => tok.decode(r.responseTokens.slice(s, e))),
    ['Crown Bank?', 'Bridge'],
  );
});
