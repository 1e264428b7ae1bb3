/**
 * rollout.completed v3's `toolCallSpans`: the validator refuses forged spans (a worker that drops
 * a doubtful call's span, moves it onto confident tokens of another turn or onto observation
 * tokens, or stacks several in one turn), and a v2 event, from before the spans were recorded,
 * upcasts to the spans its beta-GRPO rewards were computed with (the whole generated run before
 * each observation), from msgpack and from an exported JSON line alike.
 */
import { Packr } from 'msgpackr';
import t from 'tap';
import { rolloutCompletedEvent } from '../src/actors/log/fact-events.js';
import { parseEventJson } from '../src/audit/jsonl.js';
import { rolloutResultOf } from '../src/audit/rollout-result.js';
import { CURRENT_VERSION, type EventOf } from '../src/events/catalog.js';
import { CODEC_OPTIONS, decodeEvent, encodeEvent, eventToJsonLine } from '../src/events/codec.js';
import { wholeTurnSpans } from '../src/events/upcast.js';
import { searchCallConfidences } from '../src/rl/algorithms/beta-grpo.js';
import type { RolloutResult } from '../src/rl/types.js';
import { rollout } from './helpers/rollouts.js';

// Turn [0, 4) (query [2, 3)), observation [4, 6), turn [6, 9) (query [7, 8)), observation [9, 10), answer [10, 12).
const LAYOUT = 'ggggoogggogg';
const base: RolloutResult = {
  ...rollout({ index: 0, reward: 1, layout: LAYOUT, toolCalls: 2 }),
  toolCallSpans: [
    [2, 3],
    [7, 8],
  ],
};
const eventWith = (spans: Array<[number, number]>, over: Partial<RolloutResult> = {}) =>
  rolloutCompletedEvent('run1', 0, { ...base, ...over, toolCallSpans: spans });

t.test('rollout.completed is at v3', async (t) => {
  t.equal(CURRENT_VERSION['rollout.completed'], 3);
  t.strictSame(eventWith(base.toolCallSpans).data.toolCallSpans, base.toolCallSpans);
  // The refused call of a tool-limit stop sits in the last turn, which no observation follows.
  t.strictSame(
    eventWith([
      [2, 3],
      [7, 8],
      [10, 11],
    ]).data.toolCallSpans.length,
    3,
  );
});

t.test('forged spans are refused, each with the rule it breaks', async (t) => {
  const cases: Array<[unknown, string]> = [
    [[[2, 3]], 'data.toolCallSpans must hold the call of the turn [6, 9) that an observation follows'],
    [
      [
        [2, 3],
        [3, 4],
        [7, 8],
      ],
      'data.toolCallSpans must hold at most one span per turn (2 in tokens [0, 4))',
    ],
    [
      [
        [2, 5],
        [7, 8],
      ],
      'data.toolCallSpans[0] must cover generated tokens only (token 4 is an observation token)',
    ],
    [
      [
        [7, 8],
        [2, 3],
      ],
      "data.toolCallSpans[1] must start at or after the previous span's end 8 (got 2)",
    ],
    [
      [
        [1, 3],
        [2, 3],
      ],
      "data.toolCallSpans[1] must start at or after the previous span's end 3 (got 2)",
    ],
    [
      [
        [2, 3],
        [7, 13],
      ],
      'data.toolCallSpans[1] must be a non-empty range inside the 12 response tokens (got [7, 13])',
    ],
    [
      [
        [3, 3],
        [7, 8],
      ],
      'data.toolCallSpans[0] must be a non-empty range inside the 12 response tokens (got [3, 3])',
    ],
    [[[2, 3, 4]], 'data.toolCallSpans[0] must have 2 items (got 3)'],
    [[[2.5, 3]], 'data.toolCallSpans[0][0] must be an integer (got number)'],
    [[[-1, 3]], 'data.toolCallSpans[0][0] must be >= 0 (got -1)'],
    [[2, 3], 'data.toolCallSpans[0] must be an array of 2 items (got number)'],
  ];
  // Forged on the wire: a message whose spans were rewritten after the machine recorded them.
  const good = eventWith(base.toolCallSpans);
  const packr = new Packr(CODEC_OPTIONS);
  const forged = (data: object) => () =>
    decodeEvent(packr.pack({ ...good, data: { ...good.data, ...data } }));
  for (const [spans, message] of cases)
    t.throws(forged({ toolCallSpans: spans }), {
      name: 'InvalidEventError',
      message: `rollout.completed: ${message}`,
    });
  // And at the source: the event sink builds and validates the same event.
  t.throws(() => eventWith([[2, 3]]), { name: 'InvalidEventError' });
  // No tool, no call.
  const noTool = rollout({ index: 0, reward: 1, path: 'no-tool', layout: 'ggg' });
  t.throws(() => rolloutCompletedEvent('run1', 0, { ...noTool, toolCallSpans: [[0, 1]] }), {
    message: 'rollout.completed: data.toolCallSpans must be empty on the no-tool path (got 1)',
  });
  const { toolCallSpans: _drop, ...withoutSpans } = good.data;
  t.throws(() => decodeEvent(packr.pack({ ...good, data: withoutSpans })), {
    message: 'rollout.completed: data.toolCallSpans is required',
  });
});

t.test('a v2 event upcasts to the whole-turn spans its rewards were computed with', async (t) => {
  t.strictSame(wholeTurnSpans([1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1]), [
    [0, 4],
    [6, 9],
  ]);
  t.strictSame(wholeTurnSpans([0, 1, 1, 0, 0, 1]), [[1, 3]], 'a leading observation, a last run without one');
  t.strictSame(wholeTurnSpans([]), []);
  // The v2 event: what a build before v3 stored (no spans), with the old gate's inputs.
  const p = [0.1, 0.2, 0.7, 0.1, 1, 1, 0.2, 0.5, 0.1, 1, 0.9, 0.9];
  const v3 = eventWith(base.toolCallSpans, {
    responseLogprobs: p.map((x, j) => (LAYOUT[j] === 'g' ? Math.log(x) : 0)),
  });
  const { toolCallSpans: _spans, ...v2data } = v3.data;
  const v2 = { ...v3, v: 2, data: v2data };
  const fromPack = decodeEvent(new Packr(CODEC_OPTIONS).pack(v2)) as EventOf<'rollout.completed'>;
  const fromJson = parseEventJson(eventToJsonLine(v2 as never)) as EventOf<'rollout.completed'>;
  for (const [how, e] of [
    ['msgpack', fromPack],
    ['JSON line', fromJson],
  ] as const) {
    t.equal(e.v, 3, how);
    t.strictSame(
      e.data.toolCallSpans,
      [
        [0, 4],
        [6, 9],
      ],
      how,
    );
    // The old rule's confidences: min over [0, 4) = 0.1 and over [6, 9) = 0.1 (float32-stored logprobs).
    const conf = searchCallConfidences(rolloutResultOf(e));
    t.ok(Math.abs(conf[0] - 0.1) < 1e-6 && Math.abs(conf[1] - 0.1) < 1e-6, `${how}: ${conf}`);
  }
  // The same event at v3 reads its query spans: 0.7 and 0.5.
  const conf3 = searchCallConfidences(
    rolloutResultOf(decodeEvent(encodeEvent(v3)) as EventOf<'rollout.completed'>),
  );
  t.ok(Math.abs(conf3[0] - 0.7) < 1e-6 && Math.abs(conf3[1] - 0.5) < 1e-6, `${conf3}`);
});
