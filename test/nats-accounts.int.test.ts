/**
 * Issue 23 item 1: the rollout key in an account of its own (src/actors/nats/nats-accounts.ts).
 * Against a real secured nats-server 2.9, with the rollout role's credentials, the attacks that
 * subject permissions in one account could not forbid:
 *   (a) a push consumer delivering a stream's messages to the run's svc.train;
 *   (d) overwriting another writer's dead letter (the stream keeps one message per subject);
 *   (e) a pull (MSG.NEXT) whose reply subject is svc.train, so JetStream delivers work there;
 * plus purges, consumer deletes and rollups. What the role needs still works through its
 * imports: appends answered with their PubAck, pulls and acks of the run's durable.
 */
import { AckPolicy, jetstream } from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import t, { type Test } from 'tap';
import { openRunsBucket } from '../src/actors/nats/runs-bucket.js';
import { ensureRolloutQueue } from '../src/actors/orchestrator/dispatch.js';
import { rolloutConsumerName } from '../src/actors/rollout/protocol.js';
import { writeDeadLetter } from '../src/events/dead-letter.js';
import { EventStore } from '../src/events/store.js';
import {
  COMMAND_STREAM,
  commandSubject,
  DEAD_LETTER_STREAM,
  EVENTS_STREAM,
  serviceSubject,
} from '../src/events/subjects.js';
import { withNats } from './helpers/nats.js';

const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const runId = 'acct1';
await ensureRolloutQueue(store.jsm, runId);
const durable = rolloutConsumerName(runId);
const settle = () => new Promise((r) => setTimeout(r, 700));

/** The error a refused request gives, or 'allowed' with the answer. */
async function refused(nc: NatsConnection, subject: string, body: unknown): Promise<string> {
  try {
    const m = await nc.request(subject, JSON.stringify(body), { timeout: 1_500 });
    return `allowed: ${m.string().slice(0, 120)}`;
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
}

/** Everything the trainer role (and an orchestrator-side listener) would receive on svc.train. */
async function trainListeners(t: Test): Promise<string[]> {
  const got: string[] = [];
  const trainer = await nats.connectAs('trainer');
  const train = serviceSubject(runId, 'train');
  trainer.subscribe(train, {
    queue: 'trainer',
    callback: (_e, m) => void got.push(`trainer: ${m.string()}`),
  });
  nats.nc.subscribe(train, { callback: (_e, m) => void got.push(`orchestrator account: ${m.string()}`) });
  await trainer.flush();
  await nats.nc.flush();
  t.teardown(() => trainer.close());
  return got;
}

t.test('(a) no push consumer of a rollout key delivers to svc.train', async (t) => {
  const got = await trainListeners(t);
  await nats.nc.publish(commandSubject(runId, 'rollout'), 'work for the trainer?');
  const rollout = await nats.connectAs('rollout');
  t.teardown(() => rollout.close());
  const deliver = serviceSubject(runId, 'train');
  for (const stream of [EVENTS_STREAM, DEAD_LETTER_STREAM, COMMAND_STREAM]) {
    const config = {
      durable_name: 'evil',
      deliver_subject: deliver,
      deliver_group: 'trainer',
      ack_policy: AckPolicy.None,
    };
    for (const api of [
      `$JS.API.CONSUMER.CREATE.${stream}`,
      `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.evil`,
    ]) {
      const r = await refused(rollout, api, { stream_name: stream, config });
      t.notMatch(r, /^allowed/, `${api}: ${r}`);
    }
  }
  await settle();
  t.same(got, [], 'nothing reached svc.train');
  t.same(
    (await store.jsm.consumers.list(COMMAND_STREAM).next()).map((c) => c.name),
    [durable],
    'no consumer but the run durable',
  );
});

t.test('(e) a pull whose reply subject is svc.train delivers nothing there', async (t) => {
  const got = await trainListeners(t);
  await nats.nc.publish(commandSubject(runId, 'rollout'), 'pulled work');
  const rollout = await nats.connectAs('rollout');
  t.teardown(() => rollout.close());
  rollout.publish(`$JS.API.CONSUMER.MSG.NEXT.${COMMAND_STREAM}.${durable}`, JSON.stringify({ batch: 5 }), {
    reply: serviceSubject(runId, 'train'),
  });
  await rollout.flush();
  await settle();
  t.same(got, [], 'the work messages went back to the rollout account only');
});

t.test('(d) a rollout key cannot overwrite a dead letter another writer stored', async (t) => {
  const js = jetstream(nats.nc);
  const mine = await writeDeadLetter(js, {
    subject: `akbe.${runId}.evt.rollout.completed`,
    bytes: new TextEncoder().encode('the original'),
    reason: 'invalid',
    detail: 'found by a replay',
    detectedBy: 'replay',
    origin: { stream: EVENTS_STREAM, seq: 7 },
  });
  const rollout = await nats.connectAs('rollout');
  t.teardown(() => rollout.close());
  // The same subject the orchestrator wrote (predictable: reason and the event's sequence).
  const ack = await jetstream(rollout).publish(mine.deadLetterSubject, 'forged');
  const stored = await store.jsm.streams.getMessage(DEAD_LETTER_STREAM, { seq: ack.seq });
  t.equal(
    stored?.subject,
    `akbe.${runId}.dlq.invalid.rollout.e7`,
    'the rollout letter lands under its own token',
  );
  const original = await store.jsm.streams.getMessage(DEAD_LETTER_STREAM, {
    last_by_subj: mine.deadLetterSubject,
  });
  t.equal(original?.string(), 'the original', "the orchestrator's dead letter is intact");
});

t.test('no purge, stream or consumer delete, consumer update or rollup', async (t) => {
  const maxDeliver = (await store.jsm.consumers.info(COMMAND_STREAM, durable)).config.max_deliver;
  const rollout = await nats.connectAs('rollout');
  t.teardown(() => rollout.close());
  for (const api of [
    `$JS.API.STREAM.PURGE.${EVENTS_STREAM}`,
    `$JS.API.STREAM.PURGE.OBJ_akbe_checkpoints`,
    `$JS.API.STREAM.DELETE.${DEAD_LETTER_STREAM}`,
    `$JS.API.CONSUMER.DELETE.${COMMAND_STREAM}.${durable}`,
    `$JS.API.CONSUMER.CREATE.${COMMAND_STREAM}.${durable}.akbe.${runId}.cmd.rollout`,
  ]) {
    const r = await refused(rollout, api, {
      stream_name: COMMAND_STREAM,
      config: { durable_name: durable, max_deliver: 1 },
    });
    t.notMatch(r, /^allowed/, `${api}: ${r}`);
  }
  const h = headers();
  h.set('Nats-Rollup', 'all');
  const before = (await store.jsm.streams.info(EVENTS_STREAM)).state.messages;
  await t.rejects(
    jetstream(rollout).publish(`akbe.${runId}.evt.rollout.started`, 'x', { headers: h, timeout: 1_500 }),
    'rollup refused',
  );
  t.equal((await store.jsm.streams.info(EVENTS_STREAM)).state.messages, before, 'the log is intact');
  t.equal(
    (await store.jsm.consumers.info(COMMAND_STREAM, durable)).config.max_deliver,
    maxDeliver,
    'queue unchanged',
  );
});

t.test('what the role needs works through its imports: PubAck, pull, ack', async (t) => {
  const rollout = await nats.connectAs('rollout');
  t.teardown(() => rollout.close());
  const js = jetstream(rollout);
  const a1 = await js.publish(`akbe.${runId}.evt.tool.called`, 'x', { msgID: 'acct-1' });
  const a2 = await js.publish(`akbe.${runId}.evt.tool.called`, 'x', { msgID: 'acct-1' });
  t.equal(a1.stream, EVENTS_STREAM, 'PubAck through the import');
  t.ok(a2.duplicate, 'deduplicated by Nats-Msg-Id');
  // A run of its own: the attacks above left messages pending on the first one's queue.
  const run2 = 'acct2';
  await ensureRolloutQueue(store.jsm, run2);
  const consumer = await js.consumers.get(COMMAND_STREAM, rolloutConsumerName(run2));
  for (const w of ['w1', 'w2', 'w3']) await jetstream(nats.nc).publish(commandSubject(run2, 'rollout'), w);
  const got: string[] = [];
  for await (const m of await consumer.fetch({ max_messages: 3, expires: 2_000 })) {
    got.push(m.string());
    await m.ackAck();
  }
  t.same(got, ['w1', 'w2', 'w3'], 'pulled through the import');
  const info = await store.jsm.consumers.info(COMMAND_STREAM, rolloutConsumerName(run2));
  t.equal(info.num_pending + info.num_ack_pending, 0, 'acked through the import');
});

t.test(
  "no role but the orchestrator reads a run's lock or dedupe key; status and pointer read",
  async (t) => {
    const kv = await openRunsBucket(nats.nc);
    for (const k of ['lock', 'dedupe-key', 'status', 'policy']) await kv.put(`${runId}.${k}`, `secret-${k}`);
    for (const role of ['rollout', 'policy', 'search', 'trainer', 'viewer'] as const) {
      const nc = await nats.connectAs(role);
      const rkv = await openRunsBucket(nc);
      for (const k of ['lock', 'dedupe-key']) {
        const got = await rkv.get(`${runId}.${k}`).then(
          (e) => `read ${e?.string()}`,
          (err: Error) => `${err.name}: ${err.message}`,
        );
        t.notMatch(got, /^read/, `${role} ${k}: ${got}`);
        const raw = await refused(nc, `$JS.API.STREAM.MSG.GET.KV_akbe_runs`, {
          last_by_subj: `$KV.akbe_runs.${runId}.${k}`,
        });
        t.notMatch(raw, /secret/, `${role} ${k} by a stream get: ${raw.slice(0, 100)}`);
      }
      t.equal((await rkv.get(`${runId}.status`))?.string(), 'secret-status', `${role} reads the status`);
      if (role !== 'rollout')
        t.equal((await rkv.get(`${runId}.policy`))?.string(), 'secret-policy', `${role} reads the pointer`);
    }
  },
);
