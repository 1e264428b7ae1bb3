/**
 * Issue 11 item 4 (reproduction): dedupe ids are derived from an event's identity
 * (`<run>:0:learner.step`), so a message pre-published with that Nats-Msg-Id used to make
 * JetStream drop the run's real learner.step as a duplicate, silently. Now every append's
 * Nats-Msg-Id is keyed with the run's secret (EventStore.useDedupeKey): the real event is stored,
 * the planted message is dead-lettered by the replay, and the audit passes. And `akbe replay`'s
 * completeness check would have caught the old outcome: a finished step without learner.step is an
 * error.
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { pack } from '../src/actors/nats/wire.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { auditPassed, auditRun } from '../src/audit/audit.js';
import { type AkbeEvent, createEvent } from '../src/events/catalog.js';
import { encodeEvent } from '../src/events/codec.js';
import { EventStore } from '../src/events/store.js';
import { EVENTS_STREAM, eventSubject } from '../src/events/subjects.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

t.test('a message pre-published with an event dedupe id does not pre-empt the event', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-dedupe-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'prepub1';
  const js = jetstream(nats.nc);
  const planted = await js.publish(eventSubject(runId, 'learner.step'), pack({ forged: true }), {
    msgID: `${runId}:0:learner.step`,
  });
  t.notOk(planted.duplicate, 'the attacker stored its message first');

  await runTraining({
    nc: nats.nc,
    js,
    store,
    runId,
    spec: tinySpec(fx, { steps: 1 }),
    runDir: join(home, runId),
    threads: 1,
  });
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  t.equal(events.filter((e) => e.type === 'learner.step').length, 1, "the run's learner.step was stored");
  const audit = auditRun(events);
  t.same(audit.errors, [], 'no missing event');
  t.equal(audit.incomplete, null);
  t.ok(auditPassed(audit), 'the audit passes');
  const letters = [];
  for await (const d of store.deadLetters(runId)) letters.push(d);
  t.same(
    letters.map((d) => [d.originalSubject, d.origin?.seq]),
    [[eventSubject(runId, 'learner.step'), planted.seq]],
    'the planted message is dead-lettered',
  );
  const stored = await (await js.jetstreamManager()).streams.getMessage('AKBE_EVENTS', {
    last_by_subj: eventSubject(runId, 'learner.step'),
  });
  const msgId = stored?.header?.get('Nats-Msg-Id') ?? '';
  t.match(
    msgId,
    new RegExp(`^${runId}:0:learner\\.step~[A-Za-z0-9_-]{43}$`),
    'the stored id carries the run key',
  );
});

t.test('the audit fails a finished log whose step lacks its learner.step', async (t) => {
  const { auditRunEvents } = await import('./helpers/audit-run.js');
  const run = await auditRunEvents({ steps: 2 });
  const cut = run.events.filter((e) => !(e.type === 'learner.step' && e.meta.step === 0));
  const r = auditRun(cut);
  t.match(r.errors, [/step 0: no learner\.step/], 'named as an error, not a note');
  t.notOk(auditPassed(r));
  const unfinished = auditRun(run.events.filter((e) => e.type !== 'run.finished'));
  t.match(unfinished.incomplete, /no run\.finished/, 'a log without run.finished is incomplete');
  t.notOk(auditPassed(unfinished));
  t.ok(auditPassed(auditRun(run.events)), 'the whole log passes');
});

t.test("a single append is stored under the run's keyed id, past a pre-published plain one", async (t) => {
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const runId = 'prepub-single';
  const key = new Uint8Array(32).fill(7);
  store.useDedupeKey(runId, key);
  const event = createEvent(
    'run.finished',
    { status: 'completed', stepsCompleted: 1, elapsedSeconds: 1 },
    { runId, step: 1, policyVersion: 1 },
  );
  const js = jetstream(nats.nc);
  const planted = await js.publish(eventSubject(runId, 'run.finished'), pack({ forged: true }), {
    msgID: event.meta.dedupeId,
  });
  const stored = await store.append(event);
  t.notOk(stored.duplicate, 'the plain id does not pre-empt the keyed one');
  t.ok(stored.seq > planted.seq);
  const mac = createHmac('sha256', key).update(event.meta.dedupeId).digest('base64url');
  const msg = await (await js.jetstreamManager()).streams.getMessage(EVENTS_STREAM, { seq: stored.seq });
  t.equal(msg?.header?.get('Nats-Msg-Id'), `${event.meta.dedupeId}~${mac}`, 'HMAC-SHA256 of the dedupe id');
  t.same(await store.append(event), { seq: stored.seq, duplicate: true }, 'a retried append is deduplicated');
});

t.test(
  'a message stored first under the keyed id itself fails the append, never a silent duplicate',
  async (t) => {
    const nats = await withNats(t);
    const store = await EventStore.open(nats.nc);
    const runId = 'prepub-keyed';
    store.useDedupeKey(runId, new Uint8Array(32).fill(9));
    const finished = createEvent(
      'run.finished',
      { status: 'completed', stepsCompleted: 1, elapsedSeconds: 1 },
      { runId, step: 1, policyVersion: 1 },
    );
    const started = (n: number, q: string) =>
      createEvent(
        'step.started',
        { step: n, policyVersion: n, questionIds: [q] },
        { runId, step: n, policyVersion: n },
      );
    const step = started(2, 'q1');
    // Issue 23's suppression attack: a role that read the run's key from the runs bucket stores
    // messages, on a subject it may publish to, under the ids of events the run has not written.
    const js = jetstream(nats.nc);
    const forged = await js.publish(eventSubject(runId, 'rollout.completed'), pack({ forged: true }), {
      msgID: store.msgIdOf(finished),
    });
    await t.rejects(store.append(finished), {
      name: 'PreemptedAppendError',
      seq: forged.seq,
      storedSubject: eventSubject(runId, 'rollout.completed'),
      message: new RegExp(`event ${runId}:run\\.finished was not stored: .*seq ${forged.seq}`),
    });
    // The same on the right subject with another event's body (a copy of a real one), in a batch.
    const other = started(7, 'q9');
    const copied = await js.publish(eventSubject(runId, 'step.started'), encodeEvent(other), {
      msgID: store.msgIdOf(step),
    });
    await t.rejects(store.appendMany([step]), {
      name: 'PreemptedAppendError',
      seq: copied.seq,
      message: /another event: step\.started prepub-keyed:7:step\.started/,
    });
    // A real retry still dedupes quietly.
    const own = started(3, 'q2');
    const first = await store.append(own);
    t.same(await store.appendMany([own]), [{ seq: first.seq, duplicate: true }], "the run's own retry");
  },
);
