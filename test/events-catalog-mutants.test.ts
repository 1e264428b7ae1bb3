/**
 * Exact answers for the catalog's and the codec's small rules, written from the documented
 * formats (issue 16, mutation testing: the codec tests checked only that dedupe ids are unique
 * and that bad events throw something). Each value here is hand-written, not computed.
 */
import { Packr } from 'msgpackr';
import t from 'tap';
import {
  type AkbeEvent,
  CURRENT_VERSION,
  createEvent,
  defaultDedupeId,
  type EventType,
  isEventType,
  RUN_ID_PATTERN,
  validateEvent,
} from '../src/events/catalog.js';
import { ManualClock } from '../src/events/clock.js';
import {
  CODEC_OPTIONS,
  decodeRaw,
  decodeStoredEvent,
  encodeEvent,
  toJsonValue,
} from '../src/events/codec.js';

const finished = () => ({ status: 'completed' as const, stepsCompleted: 2, elapsedSeconds: 1.5 });
const stepData = () => ({ step: 3, policyVersion: 3, questionIds: ['q1', 'q2'] });
const assigned = () => ({
  text: 'Which city?',
  goldAnswers: ['Paris'],
  split: 'train',
  groupSize: { withTool: 2, noTool: 1 },
});

t.test('default dedupe ids, type by type, in the documented formats', async (t) => {
  const id = (type: EventType, data: object, meta: object) =>
    defaultDedupeId(type, data as never, { runId: 'R', step: 4, policyVersion: 4, ...meta } as never);
  t.equal(id('run.started', {}, {}), 'R:run.started');
  t.equal(id('run.finished', {}, {}), 'R:run.finished');
  t.equal(id('policy.published', { version: 5 }, {}), 'R:policy.published:5');
  t.equal(
    id('eval.completed', { when: 'after', version: 5, split: 'dev' }, {}),
    'R:eval.completed:after:v5:dev',
  );
  t.equal(id('step.started', {}, {}), 'R:4:step.started');
  t.equal(id('learner.step', {}, {}), 'R:4:learner.step');
  t.equal(id('question.assigned', {}, { questionId: 'q7' }), 'R:4:q7:question.assigned');
  t.equal(id('group.completed', {}, { questionId: 'q7' }), 'R:4:q7:group.completed');
  t.equal(id('boundary.labeled', {}, { questionId: 'q7' }), 'R:4:q7:boundary.labeled');
  const r = { questionId: 'q7', rolloutId: 's4.q7.wt1' };
  t.equal(id('rollout.started', { turn: 9 }, r), 'R:4:s4.q7.wt1:rollout.started', 'no turn: one per rollout');
  t.equal(id('rollout.completed', { turn: 9 }, r), 'R:4:s4.q7.wt1:rollout.completed');
  t.equal(id('rollout.turn', { turn: 2 }, r), 'R:4:s4.q7.wt1:rollout.turn:2');
  t.equal(id('tool.called', { turn: 0 }, r), 'R:4:s4.q7.wt1:tool.called:0');
});

t.test(
  'createEvent: the current version, the clock, the default or given dedupe id, no empty keys',
  async (t) => {
    const clock = new ManualClock(500);
    const e = createEvent('run.finished', finished(), { runId: 'R', step: 2, policyVersion: 2 }, clock);
    t.strictSame(e, {
      type: 'run.finished',
      v: 1,
      data: finished(),
      meta: { runId: 'R', step: 2, policyVersion: 2, at: 500, dedupeId: 'R:run.finished' },
    });
    const q = createEvent('question.assigned', assigned(), {
      runId: 'R',
      step: 1,
      policyVersion: 1,
      questionId: 'q1',
    });
    t.equal(q.v, 2, 'question.assigned is at v2');
    t.equal(q.v, CURRENT_VERSION['question.assigned']);
    const given = createEvent(
      'step.started',
      stepData(),
      {
        runId: 'R',
        step: 3,
        policyVersion: 3,
        at: 77,
        dedupeId: 'mine',
        seed: undefined,
        causationId: undefined,
      },
      clock,
    );
    t.strictSame(
      Object.keys(given.meta).sort(),
      ['at', 'dedupeId', 'policyVersion', 'runId', 'step'],
      'undefined optionals are dropped',
    );
    t.equal(given.meta.at, 77, 'a given `at` wins over the clock');
    t.equal(given.meta.dedupeId, 'mine');
    const seeded = createEvent('step.started', stepData(), {
      runId: 'R',
      step: 3,
      policyVersion: 3,
      seed: 0,
      at: 1,
    });
    t.equal(seeded.meta.seed, 0, 'a zero seed is kept (only undefined is dropped)');
  },
);

t.test('validateEvent: exact messages for the envelope, the version, the keys and the scope', async (t) => {
  const good = () =>
    createEvent('question.assigned', assigned(), {
      runId: 'R',
      step: 1,
      policyVersion: 1,
      questionId: 'q1',
      at: 5,
    });
  t.strictSame(validateEvent(good()), good(), 'a valid event comes back as it is');
  t.throws(() => validateEvent(null), { message: 'event: event must be an object (got null)' });
  t.throws(() => validateEvent(7), { message: 'event: event must be an object (got number)' });
  t.throws(() => validateEvent([good()]), { message: 'event: event must be an object (got object)' });
  t.throws(() => validateEvent({ v: 1 }), {
    message: /^event: type must be one of run\.started\|step\.started\|/,
  });
  t.throws(() => validateEvent({ type: 'nope' }), {
    message:
      'nope: type must be one of run.started|step.started|question.assigned|rollout.started|rollout.turn|tool.called|rollout.completed|group.completed|boundary.labeled|learner.step|policy.published|eval.completed|run.finished (got "nope")',
  });
  t.throws(() => validateEvent({ ...good(), v: 1 }), {
    name: 'InvalidEventError',
    eventType: 'question.assigned',
    path: 'v',
    message: 'question.assigned: v must be 2 (got 1)',
  });
  t.throws(() => validateEvent({ ...good(), extra: true }), {
    message: 'question.assigned: extra is not a known field',
  });
  const noQuestion = good() as unknown as { meta: Record<string, unknown> };
  delete noQuestion.meta.questionId;
  t.throws(() => validateEvent(noQuestion), { message: 'question.assigned: meta.questionId is required' });
  t.throws(() => validateEvent({ ...good(), meta: { ...good().meta, at: 0 } }), {
    message: 'question.assigned: meta.at must be >= 1 (got 0)',
  });
  const run = createEvent('run.finished', finished(), { runId: 'R', step: 0, policyVersion: 0, at: 1 });
  t.ok(validateEvent(run), 'a run-scoped event needs no questionId');
  const noData = { ...run, data: { ...finished(), status: 'won' } };
  t.throws(() => validateEvent(noData), {
    name: 'InvalidEventError',
    path: 'data.status',
    eventType: 'run.finished',
  });
  // A non-schema error inside the check is not rewrapped.
  const hostile = {
    ...run,
    meta: new Proxy(
      {},
      {
        get: () => {
          throw new RangeError('trap');
        },
      },
    ),
  };
  t.throws(() => validateEvent(hostile), RangeError);
});

t.test('meta: every field checked with its bound and message; the cause kept', async (t) => {
  const base = () =>
    createEvent('run.finished', finished(), { runId: 'R', step: 0, policyVersion: 0, at: 2 });
  const bad = (meta: Record<string, unknown>, message: string | RegExp) =>
    t.throws(() => validateEvent({ ...base(), meta: { ...base().meta, ...meta } }), {
      name: 'InvalidEventError',
      message,
    });
  bad({ policyVersion: -1 }, 'run.finished: meta.policyVersion must be >= 0 (got -1)');
  bad({ seq: 0 }, 'run.finished: meta.seq must be >= 1 (got 0)');
  bad({ questionId: '' }, 'run.finished: meta.questionId must not be empty');
  bad({ causationId: '' }, 'run.finished: meta.causationId must not be empty');
  bad(
    { dedupeId: 'has space' },
    /^run\.finished: meta\.dedupeId .*printable ASCII without spaces, 1-256 chars/,
  );
  bad({ dedupeId: ' lead' }, /meta\.dedupeId/);
  bad({ dedupeId: 'trail ' }, /meta\.dedupeId/);
  bad({ dedupeId: 'x'.repeat(257) }, /meta\.dedupeId/);
  t.ok(
    validateEvent({
      ...base(),
      meta: { ...base().meta, dedupeId: 'x'.repeat(256), seq: 1, policyVersion: 0 },
    }),
  );
  try {
    validateEvent({ ...base(), meta: { ...base().meta, seq: 0 } });
    t.fail('should throw');
  } catch (err) {
    t.match(
      (err as Error).cause,
      { name: 'SchemaViolation', path: 'meta.seq' },
      'the schema violation is the cause',
    );
  }
});

t.test('isEventType: own keys of the catalog only', async (t) => {
  t.equal(isEventType('run.started'), true);
  t.equal(isEventType('toString'), false, 'not an inherited property');
  t.equal(isEventType('constructor'), false);
  t.equal(isEventType(1), false);
  t.equal(isEventType(undefined), false);
  t.ok(RUN_ID_PATTERN.test('a-Z_9'));
  t.notOk(RUN_ID_PATTERN.test('a.b'));
  t.notOk(RUN_ID_PATTERN.test('x'.repeat(65)));
  t.ok(RUN_ID_PATTERN.test('x'.repeat(64)));
});

t.test('decodeRaw: exact reasons for what is not an event envelope', async (t) => {
  const pack = (x: unknown) => new Packr(CODEC_OPTIONS).pack(x);
  t.throws(() => decodeRaw(new Uint8Array([0x92])), {
    name: 'UndecodableEventError',
    message: 'not msgpack: Unexpected end of MessagePack data',
  });
  t.throws(() => decodeRaw(pack(null)), { message: 'not an event envelope: decoded to null' });
  t.throws(() => decodeRaw(pack([1])), { message: 'not an event envelope: decoded to an array' });
  t.throws(() => decodeRaw(pack('s')), { message: 'not an event envelope: decoded to string' });
  t.throws(() => decodeRaw(pack(3)), { message: 'not an event envelope: decoded to number' });
  const needs = 'not an event envelope: needs type (string), v (number), data and meta';
  const full = { type: 'run.finished', v: 1, data: {}, meta: {} };
  t.strictSame(decodeRaw(pack(full)), full);
  t.throws(() => decodeRaw(pack({ ...full, type: 1 })), { message: needs });
  t.throws(() => decodeRaw(pack({ ...full, v: '1' })), { message: needs });
  const { data: _d, ...noData } = full;
  t.throws(() => decodeRaw(pack(noData)), { message: needs });
  const { meta: _m, ...noMeta } = full;
  t.throws(() => decodeRaw(pack(noMeta)), { message: needs });
  t.strictSame(
    decodeRaw(pack({ ...full, data: null })),
    { ...full, data: null },
    'data may be anything present',
  );
});

t.test('decodeStoredEvent: the subject must be the one the event names', async (t) => {
  const e = createEvent('run.finished', finished(), { runId: 'R', step: 0, policyVersion: 0, at: 3 });
  const bytes = encodeEvent(e);
  t.strictSame(decodeStoredEvent('akbe.R.evt.run.finished', bytes), e);
  t.throws(() => decodeStoredEvent('akbe.S.evt.run.finished', bytes), {
    name: 'InvalidEventError',
    path: 'subject',
    message: 'run.finished: subject must be akbe.R.evt.run.finished (stored on akbe.S.evt.run.finished)',
  });
  t.throws(() => decodeStoredEvent('akbe.R.evt.run.started', bytes), {
    name: 'InvalidEventError',
    path: 'subject',
  });
});

t.test('encodeEvent drops meta.seq only; toJsonValue copies typed arrays as numbers', async (t) => {
  const e = createEvent('run.finished', finished(), { runId: 'R', step: 0, policyVersion: 0, at: 3 });
  const withSeq = { ...e, meta: { ...e.meta, seq: 9 } } as AkbeEvent;
  t.strictSame(encodeEvent(withSeq), encodeEvent(e), 'the same bytes with or without seq');
  t.strictSame(withSeq.meta.seq, 9, 'the event itself keeps its seq');
  const json = toJsonValue({
    a: new Int32Array([3, -1]),
    b: [new Float32Array([0.5]), null, 'x', { c: new Uint8Array([1, 0, 1]) }],
    d: 0,
  });
  t.strictSame(json, { a: [3, -1], b: [[0.5], null, 'x', { c: [1, 0, 1] }], d: 0 });
  t.ok(Array.isArray((json as { a: unknown }).a), 'a plain array, not a typed one');
  t.equal(toJsonValue(null), null);
  t.equal(toJsonValue('s'), 's');
});
