import { Packr } from 'msgpackr';
import t from 'tap';
import { rolloutCompletedEvent } from '../src/actors/log/fact-events.js';
import { recomputeOutcome } from '../src/audit/recompute.js';
import { rolloutResultOf } from '../src/audit/rollout-result.js';
import type { EventOf } from '../src/events/catalog.js';
import { CODEC_OPTIONS, decodeEvent, encodeEvent } from '../src/events/codec.js';
import type { RolloutResult } from '../src/rl/types.js';

/** A with-tool rollout as the rollout machine finishes it: one search, then EOS without an answer. */
const eosRollout: RolloutResult = {
  questionId: 'q1',
  rolloutId: 'q1:wt:0',
  index: 0,
  path: 'with-tool',
  policyVersion: 3,
  seed: 11,
  promptTokens: [1, 2, 3],
  responseTokens: [4, 5, 6, 7],
  responseLogprobs: [-0.5, 0, 0, -0.25],
  responseMask: [1, 0, 0, 1],
  toolCallSpans: [[0, 1]],
  segments: [
    { kind: 'generated', text: '<search> x </search>' },
    { kind: 'observation', text: '<information>Doc 1</information>' },
    { kind: 'generated', text: '<think> hm </think>' },
  ],
  answer: null,
  toolCalls: 1,
  turns: 2,
  formatOk: false,
  formatReason: 'eos',
  stopReason: 'eos',
  em: 0,
  reward: 0,
};

const stored = (r: RolloutResult) =>
  decodeEvent(encodeEvent(rolloutCompletedEvent('run1', 0, r))) as EventOf<'rollout.completed'>;

t.test('a stored rollout reads back as the machine finished it (stop reason, texts, turns)', async (t) => {
  // Before: the learner's reader turned this EOS stop into 'invalid-action' with no texts and 0
  // turns, while the audit's reader kept the texts and counted 2 turns.
  t.same(rolloutResultOf(stored(eosRollout)), eosRollout);
});

t.test('EM is 1 only for a well-formed reward of exactly 1', async (t) => {
  const partial = stored({
    ...eosRollout,
    answer: 'Paris',
    formatOk: true,
    stopReason: 'answer',
    reward: 0.5,
  });
  // The learner's reader said em = 1 here (reward > 0), the audit's em = 0 (reward === 1).
  t.equal(rolloutResultOf(partial).em, 0);
  const exact = stored({ ...eosRollout, answer: 'Paris', formatOk: true, stopReason: 'answer', reward: 1 });
  t.equal(rolloutResultOf(exact).em, 1);
  const malformed = stored({
    ...eosRollout,
    answer: 'Paris',
    formatOk: false,
    stopReason: 'answer',
    reward: 1,
  });
  t.equal(rolloutResultOf(malformed).em, 0, 'no credit without the format');
});

t.test("the audit's recomputed outcome replaces the recorded one, with the grammar's reason", async (t) => {
  const e = stored({
    ...eosRollout,
    segments: [{ kind: 'generated', text: '<answer> Paris </answer> trailing' }],
    answer: 'Paris',
    formatOk: true, // recorded wrongly: text follows the answer
    stopReason: 'answer',
    reward: 1,
  });
  const outcome = recomputeOutcome(e, ['Paris'], { maxToolCalls: 6 });
  const r = rolloutResultOf(e, { outcome, turns: 1 });
  t.same([r.formatOk, r.formatReason, r.reward, r.em, r.turns], [false, 'content-after-answer', 0, 0, 1]);
});

t.test('a v1 rollout.completed (finishReason) is upcast to v2 (stopReason), then v3', async (t) => {
  const v2 = rolloutCompletedEvent('run1', 0, { ...eosRollout, stopReason: 'length' });
  const { stopReason, toolCallSpans: _spans, ...rest } = v2.data;
  t.equal(stopReason, 'length');
  const packr = new Packr(CODEC_OPTIONS);
  for (const [finishReason, expected] of [
    ['answer', 'answer'],
    ['max-tokens', 'length'],
    ['max-turns', 'tool-limit'],
    ['format-error', 'invalid-action'],
  ] as const) {
    const v1 = packr.pack({ ...v2, v: 1, data: { ...rest, finishReason } });
    const read = decodeEvent(v1) as EventOf<'rollout.completed'>;
    t.equal(read.v, 3);
    t.equal(read.data.stopReason, expected, finishReason);
    t.strictSame(read.data.toolCallSpans, [[0, 1]], 'v2 -> v3: the generated run before the observation');
    t.notOk('finishReason' in read.data);
  }
  t.throws(() => decodeEvent(packr.pack({ ...v2, v: 1, data: { ...rest, finishReason: 'exploded' } })));
});
