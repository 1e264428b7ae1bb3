import { jetstream } from '@nats-io/jetstream';
import { Packr } from 'msgpackr';
import t from 'tap';
import type { AkbeEvent } from '../src/events/catalog.js';
import { CODEC_OPTIONS } from '../src/events/codec.js';
import type { DeadLetterReport } from '../src/events/dead-letter.js';
import { AppendError, ConcurrencyError, InvalidEventError } from '../src/events/errors.js';
import { fold, foldRun } from '../src/events/projection.js';
import { runSummary } from '../src/events/projections/run-summary.js';
import { EventStore, type StoredEvent } from '../src/events/store.js';
import { EVENTS_STREAM, eventSubject } from '../src/events/subjects.js';
import { formatTailLine } from '../src/events/tail-format.js';
import { withNats } from './helpers/nats.js';
import { syntheticRunEvents } from './helpers/synthetic.js';

const nats = await withNats(t);
const reports: DeadLetterReport[] = [];
const open = () => EventStore.open(nats.nc, { onDeadLetter: (r) => reports.push(r) });

async function collect(store: EventStore, runId: string, fromSeq?: number): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for await (const s of store.replay(runId, { fromSeq })) out.push(s);
  return out;
}

/** The events as replay returns them: the same, with the stream sequence in meta.seq. */
const withSeq = (events: AkbeEvent[], stored: StoredEvent[]) =>
  events.map((e, i) => ({ ...e, meta: { ...e.meta, seq: stored[i]?.seq } }));

t.test('the same event appended twice (same dedupe id) is stored once', async (t) => {
  const store = await open();
  const [first] = syntheticRunEvents({ runId: 'dedupe' });
  const a = await store.append(first);
  const b = await store.append(structuredClone(first));
  t.equal(a.duplicate, false);
  t.equal(b.duplicate, true);
  t.equal(b.seq, a.seq, 'the duplicate points at the stored copy');
  const batch = syntheticRunEvents({ runId: 'dedupe' }).slice(0, 5);
  const results = await store.appendMany([...batch, ...batch], { window: 4 });
  t.same(
    results.map((r) => r.duplicate),
    [true, false, false, false, false, true, true, true, true, true],
  );
  const stored = await collect(store, 'dedupe');
  t.equal(stored.length, 5);
  t.strictSame(
    stored.map((s) => s.event),
    withSeq(batch, stored),
  );
});

t.test(
  'replay returns exactly the appended sequence, also after a server restart on the same store',
  async (t) => {
    let store = await open();
    const a = syntheticRunEvents({ runId: 'replay-a', steps: 3 });
    const b = syntheticRunEvents({ runId: 'replay-b', steps: 1 });
    // Interleave two runs: each replay must return its own run only, in order.
    const mixed = a.flatMap((e, i) => (i < b.length ? [e, b[i]] : [e]));
    const acks = await store.appendMany(mixed, { window: 64 });
    t.same(
      acks.map((r) => r.seq),
      [...acks.map((r) => r.seq)].sort((x, y) => x - y),
      'stream order is append order',
    );
    const before = await collect(store, 'replay-a');
    t.strictSame(
      before.map((s) => s.event),
      withSeq(a, before),
    );
    t.equal((await collect(store, 'replay-b')).length, b.length);
    t.equal(await store.lastSeq('replay-a'), before.at(-1)!.seq);

    await nats.restart();
    store = await open();
    const after = await collect(store, 'replay-a');
    t.strictSame(after, before, 'identical after the nats-server process restarted');
    const tail = await collect(store, 'replay-a', before[10].seq);
    t.strictSame(tail, before.slice(10), 'fromSeq starts at that sequence');
    t.same(await collect(store, 'no-such-run'), [], 'an unknown run replays as empty');
  },
);

t.test("a replay from mid-stream after a restart reads to the run's last event (fresh stores)", async (t) => {
  // nats-server 2.9.10 miscounts a filtered consumer's pending messages after a restart, often
  // on a store's first restart (seen in about one try in three: 103 of 104, or 107-116): a read
  // that trusted the count lost the last event or waited for events that do not exist.
  for (let i = 0; i < 6; i++) {
    await t.test(`store ${i}`, async (t) => {
      const fresh = await withNats(t);
      const store = await EventStore.open(fresh.nc);
      const a = syntheticRunEvents({ runId: 'ra', steps: 3 });
      const b = syntheticRunEvents({ runId: 'rb', steps: 1 });
      await store.appendMany(
        a.flatMap((e, j) => (j < b.length ? [e, b[j]] : [e])),
        { window: 64 },
      );
      // rb's last event is followed by ra's: its read must end at its own last event, not wait.
      const seqs = async (s: EventStore, run: string, fromSeq?: number) =>
        (await collect(s, run, fromSeq)).map((e) => e.seq);
      const allA = await seqs(store, 'ra');
      const allB = await seqs(store, 'rb');
      await fresh.restart();
      const reopened = await EventStore.open(fresh.nc);
      t.strictSame(await seqs(reopened, 'ra', allA[10]), allA.slice(10));
      t.strictSame(await seqs(reopened, 'rb', allB[3]), allB.slice(3));
      t.equal(await reopened.lastSeq('rb'), allB.at(-1));
    });
  }
});

t.test('a replay ends at the last event present when it began', async (t) => {
  const store = await open();
  const events = syntheticRunEvents({ runId: 'snapshot', steps: 1 });
  await store.appendMany(events.slice(0, 10));
  const seen: StoredEvent[] = [];
  for await (const s of store.replay('snapshot', { batch: 2 })) {
    if (seen.length === 0) await store.appendMany(events.slice(10, 15));
    seen.push(s);
  }
  t.equal(seen.length, 10);
  t.equal((await collect(store, 'snapshot')).length, 15);
});

t.test('a following replay delivers new events live and ends when its signal aborts', async (t) => {
  const store = await open();
  const events = syntheticRunEvents({ runId: 'follow', steps: 1 });
  await store.appendMany(events.slice(0, 3));
  const abort = new AbortController();
  const seen: number[] = [];
  const reader = (async () => {
    for await (const s of store.replay('follow', { follow: true, signal: abort.signal })) {
      seen.push(s.seq);
      if (seen.length === 3) await store.appendMany(events.slice(3, 8));
      if (seen.length === 8) abort.abort();
    }
  })();
  await reader;
  t.equal(seen.length, 8, 'the 5 events appended while following arrived, then the loop ended');
});

t.test('undecodable and invalid messages end in the dead letters with their bytes and reason', async (t) => {
  const store = await open();
  reports.length = 0;
  const events = syntheticRunEvents({ runId: 'poison', steps: 1 });
  await store.appendMany(events.slice(0, 3));
  const js = jetstream(nats.nc);
  const garbage = new Uint8Array([0xc1, 0xde, 0xad, 0xbe, 0xef]);
  const garbageSubject = eventSubject('poison', 'rollout.completed');
  const g = await js.publish(garbageSubject, garbage);
  const invalid = structuredClone(events.find((e) => e.type === 'question.assigned')) as unknown as {
    data: Record<string, unknown>;
  };
  invalid.data.text = 42;
  const invalidBytes = new Packr(CODEC_OPTIONS).pack(invalid);
  const i = await js.publish(eventSubject('poison', 'question.assigned'), invalidBytes);
  await store.appendMany(events.slice(3));

  const replayed = await collect(store, 'poison');
  t.equal(replayed.length, events.length, 'every good event is replayed, the bad ones are skipped');
  t.strictSame(
    replayed.map((s) => s.event),
    withSeq(events, replayed),
  );
  t.equal(reports.length, 2, 'each bad message is reported');

  await collect(store, 'poison'); // a second reader finds the same messages: still one dead letter each
  const letters = [];
  for await (const d of store.deadLetters('poison')) letters.push(d);
  t.equal(letters.length, 2);
  const [dg, di] = letters;
  t.same(Array.from(dg.bytes), Array.from(garbage), 'the original bytes are kept');
  t.equal(dg.originalSubject, garbageSubject);
  t.equal(dg.reason, 'undecodable');
  t.match(dg.detail, /not msgpack/);
  t.same(dg.origin, { stream: EVENTS_STREAM, seq: g.seq });
  t.equal(dg.detectedBy, 'replay');
  t.same(Array.from(di.bytes), Array.from(invalidBytes));
  t.equal(di.reason, 'invalid');
  t.equal(di.detail, 'question.assigned: data.text must be a string (got number)');
  t.equal(di.origin?.seq, i.seq);
});

t.test(
  'a durable consumer delivers in order, dead-letters a failing handler, and resumes where it stopped',
  async (t) => {
    const store = await open();
    reports.length = 0;
    const events = syntheticRunEvents({ runId: 'live', steps: 2 });
    const seen: string[] = [];
    const poisoned = events[4].meta.dedupeId;
    let attempts = 0;
    const sub = await store.subscribe(
      'live-test',
      'live',
      ({ event }) => {
        if (event.meta.dedupeId === poisoned) {
          attempts++;
          throw new Error('projection bug');
        }
        seen.push(event.meta.dedupeId);
      },
      { handlerRetries: 2 },
    );
    await store.appendMany(events.slice(0, 20));
    while (sub.processed < 20) await new Promise((r) => setTimeout(r, 20));
    await sub.stop();
    t.same(
      seen,
      events
        .slice(0, 20)
        .map((e) => e.meta.dedupeId)
        .filter((id) => id !== poisoned),
    );
    t.equal(attempts, 3, 'one try plus two retries');
    t.equal(reports.length, 1);
    t.equal(reports[0].reason, 'handler-failed');
    t.match(reports[0].detail, /projection bug/);

    await store.appendMany(events.slice(20));
    const again: string[] = [];
    await using sub2 = await store.subscribe('live-test', 'live', ({ event }) => {
      again.push(event.meta.dedupeId);
    });
    while (sub2.processed < events.length - 20) await new Promise((r) => setTimeout(r, 20));
    t.same(
      again,
      events.slice(20).map((e) => e.meta.dedupeId),
      'the durable resumes after its last ack',
    );
  },
);

t.test('failures surface: invalid events, concurrency conflicts, a missing stream', async (t) => {
  const store = await open();
  const events = syntheticRunEvents({ runId: 'failures', steps: 1 });
  const bad = structuredClone(events[1]) as unknown as { meta: Record<string, unknown> };
  bad.meta.step = -1;
  await t.rejects(store.append(bad as unknown as AkbeEvent), InvalidEventError);
  await t.rejects(store.appendMany([events[0], bad as unknown as AkbeEvent]), {
    message: 'step.started: meta.step must be >= 0 (got -1)',
  });
  t.equal((await collect(store, 'failures')).length, 0, 'a batch with an invalid event stores nothing');

  const first = await store.append(events[0]);
  await t.rejects(store.append(events[1], { expectLastSubjectSeq: first.seq + 1000 }), ConcurrencyError);

  await store.jsm.streams.delete(EVENTS_STREAM);
  const err = await store.appendMany(events.slice(0, 6), { window: 3 }).catch((e: unknown) => e);
  t.type(err, AppendError);
  t.same(
    (err as AppendError).failedDedupeIds,
    events.slice(0, 6).map((e) => e.meta.dedupeId),
    'every not-stored event is listed',
  );
  t.match((err as AppendError).cause, {
    name: 'EventStoreError',
    message: /no JetStream stream stores akbe.failures.evt.run.started/,
  });
});

t.test('foldRun folds a replay into the run-summary projection; tail lines are readable', async (t) => {
  const store = await open();
  const events = syntheticRunEvents({ runId: 'summary', steps: 3, questionsPerStep: 2 });
  await store.appendMany(events);
  const { state, events: n, lastSeq } = await foldRun(store, 'summary', runSummary);
  t.equal(n, events.length);
  t.ok(lastSeq > 0);
  t.equal(state.runId, 'summary');
  t.equal(state.status, 'completed');
  t.equal(state.algo, 'grpo+akbe');
  t.equal(state.steps, 3);
  t.equal(state.policyVersion, 3);
  t.equal(state.counts['boundary.labeled'], 6);
  t.equal(state.counts['rollout.completed'], 3 * 2 * 4);
  t.strictSame(state, fold(runSummary, events), 'the store fold equals the in-memory fold');
  const line = formatTailLine({
    ...events.find((e) => e.type === 'rollout.completed')!,
    meta: { ...events[0].meta, seq: 7, questionId: 'q0', rolloutId: 's0-q0-wt-0' },
  } as AkbeEvent);
  t.match(
    line,
    /^ {4}#7 {2}\d\d:\d\d:\d\d\.\d{3} {2}rollout\.completed v3 +step=0 pv=0 q=q0 r=s0-q0-wt-0 {2}with-tool#0 reward=[01] format=ok/,
  );
  t.equal(line.split('\n').length, 1);
});
