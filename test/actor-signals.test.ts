/**
 * House rule 4: the machines' injected actors take xstate's AbortSignal and pass it on, so a
 * rollout that is stopped (its question's step abandoned, the run failing) stops waiting.
 */
import t from 'tap';
import { createActor } from 'xstate';
import { toolCallActor } from '../src/actors/rollout/tool-calls.js';
import { DEFAULT_TOOLS, toolsNamed } from '../src/tools/registry.js';
import type { ServiceCall } from '../src/tools/tool.js';
import { abortable } from '../src/util/abortable.js';

t.test('the callTool actor hands its signal to the service call; stopping the actor aborts it', async (t) => {
  const seen: Array<AbortSignal | undefined> = [];
  const service: ServiceCall = (_name, _body, signal) => {
    seen.push(signal);
    return new Promise(() => undefined); // a search service that never answers
  };
  const logic = toolCallActor(toolsNamed(DEFAULT_TOOLS, { topK: 3 }), service, {
    insert: (text) => ({ text, tokens: [] }),
  });
  const actor = createActor(logic, {
    input: { rolloutId: 'r', questionId: 'q', tag: 'search', query: 'who', call: 1, turn: 0 },
  });
  actor.start();
  await new Promise((r) => setImmediate(r));
  t.equal(seen.length, 1, 'the service was called once');
  t.equal(seen[0]?.aborted, false, 'with a live signal');
  actor.stop();
  t.equal(seen[0]?.aborted, true, 'which the stop aborted');
});

t.test('abortable: the work is raced against the signal', async (t) => {
  const ctl = new AbortController();
  const pending = abortable(new Promise<number>(() => undefined), ctl.signal);
  ctl.abort(new Error('stopped'));
  await t.rejects(pending, /stopped/);
  await t.rejects(abortable(Promise.resolve(1), ctl.signal), /stopped/, 'an aborted signal rejects at once');
  t.equal(await abortable(Promise.resolve(7), new AbortController().signal), 7);
});
