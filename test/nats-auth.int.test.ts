/**
 * Issue 11 item 1: every akbe server requires credentials, and each role may do only its job.
 * Each attack from the issue is replayed against a real secured nats-server: anonymous clients,
 * a rollout worker forging train requests, policy versions or learner events, a rogue responder
 * on svc.generate, a viewer writing, and stream purges by non-orchestrators.
 */
import { readFileSync, statSync } from 'node:fs';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { connectAkbeNats } from '../src/actors/nats/connection.js';
import { authConfPath, NATS_ROLES, seedPath } from '../src/actors/nats/nats-auth.js';
import { openRunsBucket } from '../src/actors/nats/runs-bucket.js';
import { ensureRolloutQueue } from '../src/actors/orchestrator/dispatch.js';
import { rolloutConsumerName } from '../src/actors/rollout/protocol.js';
import { EventStore } from '../src/events/store.js';
import { COMMAND_STREAM, commandSubject, eventSubject, serviceSubject } from '../src/events/subjects.js';
import { withNats } from './helpers/nats.js';
import { syntheticRunEvents } from './helpers/synthetic.js';

const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const runId = 'sec1';

/** Resolves to the error a refused publish-with-reply gives (JetStream publish or request). */
async function refused(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'allowed';
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
}

t.test('anonymous and unknown clients are refused', async (t) => {
  // With the server's CA (TLS passes), so that what is refused is the missing credentials.
  const tls = { caFile: nats.server.caFile! };
  await t.rejects(connect({ servers: nats.server.url, timeout: 3_000, tls }), /Authorization Violation/i);
  // The connection helper names the missing credentials and the fix.
  await t.rejects(
    connectAkbeNats({
      url: nats.server.url,
      env: { AKBE_HOME: nats.dir, AKBE_NATS_AUTH_DIR: '/nonexistent' },
    }),
    /no credentials: set AKBE_NATS_CREDS/,
  );
});

t.test('seeds are private to the user, and the config holds only public keys', async (t) => {
  t.equal(statSync(nats.authDir).mode & 0o777, 0o700);
  for (const role of NATS_ROLES) t.equal(statSync(seedPath(nats.authDir, role)).mode & 0o777, 0o600, role);
  const conf = readFileSync(authConfPath(nats.authDir), 'utf8');
  for (const role of NATS_ROLES)
    t.notOk(
      conf.includes(readFileSync(seedPath(nats.authDir, role), 'utf8').trim()),
      `no ${role} seed in auth.conf`,
    );
  t.match(conf, /nkey: U[A-Z2-7]{55}/, 'public user keys');
  t.notMatch(conf, /^\s*no_auth_user/m, 'no anonymous user');
});

t.test(
  'a rollout worker cannot train, publish policy versions or other events, nor answer generate',
  async (t) => {
    const nc = await nats.connectAs('rollout');
    const js = jetstream(nc);
    const train = await refused(
      nc.request(serviceSubject(runId, 'train'), new Uint8Array([1]), { timeout: 2_000 }),
    );
    t.match(train, /Permissions Violation|permission/i, `svc.train request: ${train}`);
    for (const type of [
      'policy.published',
      'learner.step',
      'boundary.labeled',
      'run.finished',
      'step.started',
    ]) {
      const r = await refused(js.publish(eventSubject(runId, type), new Uint8Array([1]), { timeout: 2_000 }));
      t.match(r, /Permissions Violation|permission/i, `${type}: ${r}`);
    }
    const kv = await refused(
      js.publish('$KV.akbe_runs.sec1.policy', new Uint8Array([1]), { timeout: 2_000 }),
    );
    t.match(kv, /Permissions Violation|permission/i, `current policy version in KV: ${kv}`);
    const jsm = await jetstreamManager(nc, { timeout: 2_000 });
    const purge = await refused(jsm.streams.purge('AKBE_EVENTS'));
    t.match(purge, /Permissions Violation|permission/i, `purge AKBE_EVENTS: ${purge}`);
    const rogue = await refused(subscribeOnce(nc, serviceSubject(runId, 'generate')));
    t.match(rogue, /Permissions Violation|permission/i, `rogue svc.generate responder: ${rogue}`);
    // Its own job still works: rollout events are stored.
    const ok = await js.publish(eventSubject(runId, 'rollout.started'), new Uint8Array([1]));
    t.ok(ok.seq > 0, 'rollout.started is allowed');
  },
);

t.test('services may answer only their own subject and publish no events', async (t) => {
  for (const role of ['policy', 'search', 'trainer'] as const) {
    const nc = await nats.connectAs(role);
    const js = jetstream(nc);
    const r = await refused(
      js.publish(eventSubject(runId, 'rollout.completed'), new Uint8Array([1]), { timeout: 2_000 }),
    );
    t.match(r, /Permissions Violation|permission/i, `${role} forging rollout.completed: ${r}`);
    const other = role === 'policy' ? 'search' : 'generate';
    const s = await refused(subscribeOnce(nc, serviceSubject(runId, other)));
    t.match(s, /Permissions Violation|permission/i, `${role} serving svc.${other}: ${s}`);
  }
});

t.test('a viewer reads the log but writes nothing', async (t) => {
  const events = syntheticRunEvents({ runId: 'sec-view', steps: 1 }).slice(0, 5);
  for (const e of events) await store.append(e);
  const nc = await nats.connectAs('viewer');
  const viewerStore = await EventStore.open(nc);
  const seen: string[] = [];
  for await (const { event } of viewerStore.replay('sec-view')) seen.push(event.type);
  t.same(
    seen,
    events.map((e) => e.type),
    'the viewer replays the log',
  );
  const js = jetstream(nc);
  const r = await refused(
    js.publish(eventSubject(runId, 'rollout.started'), new Uint8Array([1]), { timeout: 2_000 }),
  );
  t.match(r, /Permissions Violation|permission/i, `viewer publishing: ${r}`);
  const c = await refused(
    nc.request(serviceSubject(runId, 'generate'), new Uint8Array([1]), { timeout: 2_000 }),
  );
  t.match(c, /Permissions Violation|permission/i, `viewer calling svc.generate: ${c}`);
});

/** Subscribes and waits for the first message or the subscription's error. */
async function subscribeOnce(nc: NatsConnection, subject: string): Promise<void> {
  const sub = nc.subscribe(subject, { queue: 'policy' });
  const timer = setTimeout(() => sub.unsubscribe(), 2_000);
  try {
    for await (const _ of sub) break;
  } finally {
    clearTimeout(timer);
  }
  await sub.closed;
}

t.test("a rollout key cannot reconfigure the run's work queue, only read and pull it", async (t) => {
  await ensureRolloutQueue(store.jsm, runId);
  const durable = rolloutConsumerName(runId);
  const nc = await nats.connectAs('rollout');
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc, { timeout: 2_000 });
  // The attack: max_deliver 1 and ack wait 1 ms on the run's queue (an update in 2.9).
  const update = await refused(
    jsm.consumers.update(COMMAND_STREAM, durable, { max_deliver: 1, ack_wait: 1_000_000 }),
  );
  t.match(update, /Permissions Violation|permission|timeout/i, `update: ${update}`);
  const add = await refused(
    jsm.consumers.add(COMMAND_STREAM, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      filter_subject: commandSubject(runId, 'rollout'),
      max_deliver: 1,
    }),
  );
  t.match(add, /Permissions Violation|permission|timeout/i, `re-create: ${add}`);
  const del = await refused(jsm.consumers.delete(COMMAND_STREAM, durable));
  t.match(del, /Permissions Violation|permission|timeout/i, `delete: ${del}`);
  const info = await store.jsm.consumers.info(COMMAND_STREAM, durable);
  t.equal(info.config.max_deliver, 5, 'the queue keeps its settings');
  // Its own job still works: the worker binds to the durable and reads it.
  const consumer = await jetstream(nc).consumers.get(COMMAND_STREAM, durable);
  t.equal((await consumer.info()).config.max_deliver, 5, 'a worker reads the queue');
});

t.test('the trainer key writes no KV key, so it cannot roll the runs bucket up', async (t) => {
  const kv = await openRunsBucket(nats.nc);
  await kv.put(`${runId}.status`, 'running');
  const nc = await nats.connectAs('trainer');
  t.teardown(() => nc.close());
  const js = jetstream(nc);
  // The attack wrote every run's lock, dedupe key and status with this key; the policy
  // pointer is the orchestrator's too now (run-steps.ts), and a rollup on it purged the bucket.
  for (const key of ['lock', 'dedupe-key', 'status', 'policy']) {
    const r = await refused(
      js.publish(`$KV.akbe_runs.${runId}.${key}`, new Uint8Array([1]), { timeout: 2_000 }),
    );
    t.match(r, /Permissions Violation|permission/i, `${key}: ${r}`);
  }
  const rollup = headers();
  rollup.set('Nats-Rollup', 'all');
  const r = await refused(
    js.publish(`$KV.akbe_runs.${runId}.policy`, new Uint8Array([1]), { headers: rollup, timeout: 2_000 }),
  );
  t.match(r, /Permissions Violation|permission/i, `rollup: ${r}`);
  t.equal((await kv.get(`${runId}.status`))?.string(), 'running', 'the bucket is intact');
});
