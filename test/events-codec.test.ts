import { Packr, Unpackr } from 'msgpackr';
import t from 'tap';
import { parseEventJson } from '../src/audit/jsonl.js';
import { type AkbeEvent, createEvent, EVENT_TYPES, validateEvent } from '../src/events/catalog.js';
import { ManualClock, MonotonicClock } from '../src/events/clock.js';
import { CODEC_OPTIONS, decodeEvent, encodeEvent, eventToJsonLine } from '../src/events/codec.js';
import {
  InvalidEventError,
  InvalidRunIdError,
  UndecodableEventError,
  UnsupportedEventVersionError,
} from '../src/events/errors.js';
import { assertRunId, eventSubject, parseSubject, runEventsFilter } from '../src/events/subjects.js';
import { UpcasterRegistry } from '../src/events/upcast.js';
import { syntheticRunEvents } from './helpers/synthetic.js';

const events = syntheticRunEvents({ runId: 'codec-run', steps: 2, questionsPerStep: 2 });

function rolloutCompleted(): Extract<AkbeEvent, { type: 'rollout.completed' }> {
  return structuredClone(events.find((e) => e.type === 'rollout.completed')) as Extract<
    AkbeEvent,
    { type: 'rollout.completed' }
  >;
}

t.test('the synthetic run covers every event type of the catalog', async (t) => {
  t.same(new Set(events.map((e) => e.type)), new Set(EVENT_TYPES));
  t.equal(EVENT_TYPES.length, 13);
});

t.test('every event type round-trips, typed arrays included, through a FRESH decoder', async (t) => {
  for (const event of events) {
    const bytes = encodeEvent(event);
    // A decoder that has never seen another message (no shared record structures).
    const fresh = new Unpackr(CODEC_OPTIONS).unpack(bytes);
    t.strictSame(fresh, event, `${event.type} decodes with a fresh Unpackr`);
    t.strictSame(decodeEvent(bytes), event, `${event.type} decodes and validates`);
  }
  const done = decodeEvent(encodeEvent(rolloutCompleted())) as Extract<
    AkbeEvent,
    { type: 'rollout.completed' }
  >;
  t.type(done.data.responseTokenIds, Int32Array);
  t.type(done.data.oldLogprobs, Float32Array);
  t.type(done.data.lossMask, Uint8Array);
  t.notOk(Buffer.isBuffer(done.data.lossMask), 'a mask decodes as Uint8Array, not a Buffer');
});

t.test(
  'messages are self-contained: decoding in reverse order with one decoder gives the same events',
  async (t) => {
    const encoded = events.map(encodeEvent);
    t.same(
      encodeEvent(events[0]),
      encoded[0],
      'encoding is deterministic: no state carried between messages',
    );
    const decoder = new Unpackr(CODEC_OPTIONS);
    for (let i = encoded.length - 1; i >= 0; i--) t.strictSame(decoder.unpack(encoded[i]), events[i]);
    // A decoder built with shared structures from another packer must not be needed either.
    const other = new Packr({ ...CODEC_OPTIONS, structures: [] });
    other.pack({ unrelated: 1, shape: 2 });
    t.strictSame(decodeEvent(encoded[3]), events[3]);
  },
);

t.test('meta.seq is never written', async (t) => {
  const e = { ...events[0], meta: { ...events[0].meta, seq: 42 } } as AkbeEvent;
  t.equal(decodeEvent(encodeEvent(e)).meta.seq, undefined);
});

t.test('an invalid event is rejected with a message naming the field', async (t) => {
  const bad = rolloutCompleted() as unknown as {
    data: Record<string, unknown>;
    meta: Record<string, unknown>;
  };
  bad.data.reward = 'one';
  t.throws(
    () => validateEvent(bad),
    new InvalidEventError('rollout.completed', 'data.reward', 'must be a finite number (got string)'),
  );
  t.throws(() => validateEvent(bad), {
    message: 'rollout.completed: data.reward must be a finite number (got string)',
  });

  const short = rolloutCompleted();
  short.data.lossMask = short.data.lossMask.subarray(1);
  t.throws(() => validateEvent(short), {
    name: 'InvalidEventError',
    path: 'data.lossMask',
    message: /rollout.completed: data.lossMask must have one value per response token/,
  });

  const mask = rolloutCompleted();
  mask.data.lossMask[0] = 2;
  t.throws(() => validateEvent(mask), { path: 'data.lossMask[0]', message: /must be 0 or 1 \(got 2\)/ });

  const noRollout = rolloutCompleted() as unknown as { meta: Record<string, unknown> };
  delete noRollout.meta.rolloutId;
  t.throws(() => validateEvent(noRollout), { message: 'rollout.completed: meta.rolloutId is required' });

  const extra = rolloutCompleted() as unknown as { data: Record<string, unknown> };
  extra.data.rewrad = 1;
  t.throws(() => validateEvent(extra), { message: 'rollout.completed: data.rewrad is not a known field' });

  const ints = rolloutCompleted() as unknown as { data: Record<string, unknown> };
  ints.data.responseTokenIds = [1, 2, 3];
  t.throws(() => validateEvent(ints), {
    message: 'rollout.completed: data.responseTokenIds must be an Int32Array (got array)',
  });

  t.throws(() => validateEvent({ type: 'rollout.exploded', v: 1, data: {}, meta: {} }), {
    path: 'type',
    message: /must be one of run.started\|/,
  });
  t.throws(() => validateEvent(null), { name: 'InvalidEventError' });
  t.throws(
    () =>
      createEvent(
        'boundary.labeled',
        {
          wt: true,
          nt: false,
          category: 'efficiency',
          targetRolloutId: 'r1',
          selectionRule: 'min-tool-calls',
          tieBreakSeed: 1,
          previousCategory: null,
        },
        { runId: 'r', step: 0, policyVersion: 0, questionId: 'q1' },
      ),
    {
      message:
        "boundary.labeled: data.category must be 'tool-dependent' when wt=true and nt=false (got 'efficiency')",
    },
  );
  t.throws(
    () =>
      createEvent(
        'run.finished',
        { status: 'done' as 'completed', stepsCompleted: 1, elapsedSeconds: 1 },
        { runId: 'bad.run', step: 0, policyVersion: 0 },
      ),
    {
      message: /run.finished: meta.runId must match/,
    },
  );
});

t.test('undecodable bytes and non-envelopes are UndecodableEventError', async (t) => {
  t.throws(() => decodeEvent(new Uint8Array([0xc1, 0xff, 0x00])), UndecodableEventError);
  t.throws(() => decodeEvent(new Packr(CODEC_OPTIONS).pack([1, 2, 3])), {
    name: 'UndecodableEventError',
    message: /decoded to an array/,
  });
  t.throws(() => decodeEvent(new Packr(CODEC_OPTIONS).pack({ hello: 'world' })), {
    name: 'UndecodableEventError',
    message: /needs type/,
  });
  const future = { ...events[0], v: 99 };
  t.throws(() => decodeEvent(new Packr(CODEC_OPTIONS).pack(future)), UnsupportedEventVersionError);
});

t.test('upcasters lift old versions one step at a time, and a missing step is refused', async (t) => {
  const registry = new UpcasterRegistry({ 'x.test': 3 });
  const v1to2 = (d: unknown) => ({ ...(d as object), added: true });
  registry.register('x.test', 1, v1to2);
  registry.register('x.test', 1, v1to2); // same function again: allowed
  t.throws(() => registry.register('x.test', 1, (d) => d), { name: 'DuplicateUpcasterError' });
  t.throws(
    () => registry.upcast({ type: 'x.test', v: 1, data: { a: 1 }, meta: {} }),
    UnsupportedEventVersionError,
    'no 2 -> 3 step yet',
  );
  registry.register('x.test', 2, (d) => ({ ...(d as object), renamed: (d as { a: number }).a }));
  t.same(registry.upcast({ type: 'x.test', v: 1, data: { a: 1 }, meta: {} }), {
    type: 'x.test',
    v: 3,
    data: { a: 1, added: true, renamed: 1 },
    meta: {},
  });
  t.throws(() => registry.upcast({ type: 'x.test', v: 4, data: {}, meta: {} }), {
    name: 'UnsupportedEventVersionError',
    message: /v4 is not readable/,
  });
});

t.test('dedupe ids are derived from identity: unique within a run, stable across rebuilds', async (t) => {
  const ids = events.map((e) => e.meta.dedupeId);
  t.equal(new Set(ids).size, ids.length, 'no two events of the run share a dedupe id');
  const again = syntheticRunEvents({ runId: 'codec-run', steps: 2, questionsPerStep: 2 });
  t.same(
    again.map((e) => e.meta.dedupeId),
    ids,
  );
});

t.test('the clock is strictly increasing; ManualClock is injectable', async (t) => {
  const clock = new MonotonicClock();
  let last = 0;
  for (let i = 0; i < 10_000; i++) {
    const now = clock.now();
    if (!(now > last)) t.fail(`clock went from ${last} to ${now}`);
    last = now;
  }
  t.ok(Math.abs(last - Date.now()) < 1000, 'close to wall time');
  const manual = new ManualClock(1000);
  t.equal(
    createEvent(
      'run.finished',
      { status: 'aborted', reason: 'ctrl-c', stepsCompleted: 0, elapsedSeconds: 0 },
      { runId: 'r', step: 0, policyVersion: 0 },
      manual,
    ).meta.at,
    1000,
  );
});

t.test('subjects: run ids are validated, event types keep their dots', async (t) => {
  t.equal(eventSubject('r-1', 'rollout.completed'), 'akbe.r-1.evt.rollout.completed');
  t.equal(runEventsFilter('r_1'), 'akbe.r_1.evt.>');
  t.same(parseSubject('akbe.r1.evt.rollout.turn'), { runId: 'r1', kind: 'evt', rest: 'rollout.turn' });
  t.equal(parseSubject('other.r1.evt.x'), null);
  for (const bad of ['a.b', 'a b', '', '*', '>', 'x'.repeat(65)])
    t.throws(() => assertRunId(bad), InvalidRunIdError, JSON.stringify(bad));
});

t.test('JSONL lines carry typed arrays as plain number arrays, values included', async (t) => {
  const e = rolloutCompleted();
  e.data.promptTokenIds = Int32Array.from([7, 3]);
  e.data.responseTokenIds = Int32Array.from([5, 9, 2]);
  e.data.oldLogprobs = Float32Array.from([-0.5, -1.25, -3]);
  e.data.lossMask = Uint8Array.from([1, 0, 1]);
  const line = eventToJsonLine(e);
  const parsed = JSON.parse(line);
  t.same(parsed.data.promptTokenIds, [7, 3]);
  t.same(parsed.data.responseTokenIds, [5, 9, 2]);
  t.same(parsed.data.oldLogprobs, [-0.5, -1.25, -3]);
  t.same(parsed.data.lossMask, [1, 0, 1]);
  t.ok(Array.isArray(parsed.data.responseTokenIds), 'a plain array, not an object keyed by index');
  t.notMatch(line, /\n/);
  // Every event of the synthetic run survives export and import bit for bit.
  for (const event of events)
    t.strictSame(parseEventJson(eventToJsonLine(event)), event, `${event.type} through a JSON line`);
});

t.test('question.assigned v2 carries the oracle; a v1 event (none) is read as v2 without it', async (t) => {
  const v2 = structuredClone(events.find((e) => e.type === 'question.assigned')) as Extract<
    AkbeEvent,
    { type: 'question.assigned' }
  >;
  t.equal(v2.v, 2);
  v2.data.known = false;
  t.equal((decodeEvent(encodeEvent(v2)) as typeof v2).data.known, false, 'false survives msgpack');
  const { known: _, ...v1data } = v2.data;
  const packr = new Packr(CODEC_OPTIONS);
  const read = decodeEvent(packr.pack({ ...v2, v: 1, data: v1data })) as typeof v2;
  t.equal(read.v, 2);
  t.notOk('known' in read.data, 'no oracle invented for a v1 event');
  t.same(read.data.goldAnswers, v2.data.goldAnswers);
  t.throws(() => validateEvent({ ...v2, data: { ...v2.data, known: 'yes' } }), {
    message: /question\.assigned: data\.known/,
  });
});
