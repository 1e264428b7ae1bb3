/**
 * Issue 23 item 3: message ids each role's events are appended with are keyed by that role's own
 * secret, its nkey seed (events/message-key.ts). The suppression attack of the issue, reproduced
 * against an authenticated server with a rollout key: it stores messages under every id of the
 * run's future learner.step, policy.published and run.finished it can compute (plain, keyed with
 * its own seed, keyed with the run's KV key) and none pre-empts the real event. Then: a resumed
 * orchestrator (same seed) and a second rollout worker (same credentials) get the same ids, so
 * retries still dedupe; without credentials the run's KV key is the fallback, and a pre-empted
 * append there fails the run in one line instead of exiting 0 with a log that lacks the event.
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { type NatsRole, seedPath } from '../src/actors/nats/nats-auth.js';
import { RUNS_BUCKET } from '../src/actors/nats/runs-bucket.js';
import { pack } from '../src/actors/nats/wire.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { auditPassed, auditRun } from '../src/audit/audit.js';
import { type AkbeEvent, createEvent } from '../src/events/catalog.js';
import { credentialMessageKey, messageKeyOf } from '../src/events/message-key.js';
import { EventStore } from '../src/events/store.js';
import { EVENTS_STREAM, eventSubject } from '../src/events/subjects.js';
import { runCli } from './helpers/cli.js';
import { type TestNats, withNats } from './helpers/nats.js';
import { TINY_TRAIN, tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

delete process.env.NATS_URL;

const seedOf = (nats: TestNats, role: NatsRole) =>
  new TextEncoder().encode(readFileSync(seedPath(nats.authDir, role), 'utf8').trim());

const keyedId = (key: Uint8Array, dedupeId: string) =>
  `${dedupeId}~${createHmac('sha256', key).update(dedupeId).digest('base64url')}`;

/** The ids a 1-step run's orchestrator will append that a reader of the catalog can predict. */
const predictable = (runId: string) => [
  `${runId}:0:learner.step`,
  `${runId}:1:policy.published`,
  `${runId}:run.finished`,
];

async function storedMsgId(nc: NatsConnection, runId: string, type: string): Promise<string> {
  const m = await (await jetstream(nc).jetstreamManager()).streams.getMessage(EVENTS_STREAM, {
    last_by_subj: eventSubject(runId, type),
  });
  return m?.header?.get('Nats-Msg-Id') ?? '';
}

t.test('a rollout key cannot pre-empt the orchestrator events of a run', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const home = mkdtempSync(join(tmpdir(), 'akbe-msgid-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'msgid-attack';
  const store = await EventStore.open(nats.nc);
  const rollout = await nats.connectAs('rollout');
  const rjs = jetstream(rollout);
  // Everything the rollout key can compute: the plain ids and ids under its own seed's key...
  const kv = await new Kvm(nats.nc).create(RUNS_BUCKET);
  const ownKey = credentialMessageKey(seedOf(nats, 'rollout'), runId);
  const plant = async (msgID: string) => {
    const ack = await rjs.publish(eventSubject(runId, 'rollout.completed'), pack({ forged: true }), {
      msgID,
    });
    return !ack.duplicate;
  };
  for (const id of predictable(runId))
    for (const msgID of [id, keyedId(ownKey, id)])
      t.ok(await plant(msgID), `the rollout key stored ${msgID} first`);
  // ...and, as the attacker did, under the run's KV key the moment one appears.
  const stop = new AbortController();
  const stolen = (async () => {
    const rkv = await new Kvm(rollout).open(RUNS_BUCKET);
    while (!stop.signal.aborted) {
      const e = await rkv.get(`${runId}.dedupe-key`).catch(() => null);
      if (e && e.length > 0) {
        const key = Buffer.from(e.string(), 'base64');
        for (const id of predictable(runId)) await plant(keyedId(key, id));
        return true;
      }
      await delay(5);
    }
    return false;
  })();

  const orchestratorSeed = seedOf(nats, 'orchestrator');
  await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec: tinySpec(fx, { steps: 1 }),
    runDir: join(home, runId),
    threads: 1,
    signingSeed: orchestratorSeed,
  });
  stop.abort();
  t.equal(await stolen, false, 'the rollout key found no run key to read');
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  for (const type of ['learner.step', 'policy.published', 'run.finished'])
    t.equal(events.filter((e) => e.type === type).length, 1, `the run's ${type} is stored`);
  const audit = auditRun(events);
  t.same(audit.errors, [], 'no missing event');
  t.ok(auditPassed(audit), 'the audit passes');
  const started = events.find((e) => e.type === 'run.started');
  t.equal(started?.type === 'run.started' && started.data.config.messageIds, 'credentials');
  // The ids are the orchestrator seed's: a resumed orchestrator with that seed computes them again.
  const key = credentialMessageKey(orchestratorSeed, runId);
  t.equal(await storedMsgId(nats.nc, runId, 'learner.step'), keyedId(key, `${runId}:0:learner.step`));
  t.equal(await storedMsgId(nats.nc, runId, 'run.finished'), keyedId(key, `${runId}:run.finished`));
  t.equal(await kv.get(`${runId}.dedupe-key`), null, 'no key stored in KV for any role to read');
});

t.test('the same credentials get the same ids: a resume and a second worker still dedupe', async (t) => {
  const nats = await withNats(t);
  const runId = 'msgid-resume';
  const noKvKey = async () => {
    throw new Error('a process with credentials reads no KV key');
  };
  const keyedStore = async (role: NatsRole) => {
    const nc = await nats.connectAs(role);
    const store = await EventStore.open(nc);
    const { key, scheme } = await messageKeyOf(runId, seedOf(nats, role), noKvKey);
    t.equal(scheme, 'credentials');
    store.useDedupeKey(runId, key);
    return store;
  };
  const step = createEvent(
    'step.started',
    { step: 0, policyVersion: 0, questionIds: ['q1'] },
    { runId, step: 0, policyVersion: 0 },
  );
  const first = await (await keyedStore('orchestrator')).append(step);
  t.notOk(first.duplicate);
  const resumed = await keyedStore('orchestrator');
  t.same(await resumed.append(step), { seq: first.seq, duplicate: true }, 'a resumed orchestrator');
  t.same(await resumed.appendMany([step]), [{ seq: first.seq, duplicate: true }], 'and its batch retry');

  const turn = createEvent(
    'rollout.started',
    { path: 'with-tool', index: 0, seed: 1 },
    { runId, step: 0, policyVersion: 0, questionId: 'q1', rolloutId: 'r1' },
  );
  const w1 = await keyedStore('rollout');
  const stored = await w1.append(turn);
  t.same(await (await keyedStore('rollout')).append(turn), { seq: stored.seq, duplicate: true }, 'worker 2');
  t.not(w1.msgIdOf(step), resumed.msgIdOf(step), "a rollout key computes other ids than the orchestrator's");
});

t.test('without credentials: the run KV key, and a pre-empted append fails the run', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const home = mkdtempSync(join(tmpdir(), 'akbe-msgid-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'msgid-nocreds';
  const store = await EventStore.open(nats.nc);
  // An unsecured server lets any client read (or create first) the run's KV key: one did.
  const kv = await new Kvm(nats.nc).create(RUNS_BUCKET);
  const key = new Uint8Array(32).fill(5);
  await kv.create(`${runId}.dedupe-key`, Buffer.from(key).toString('base64'));
  const js = jetstream(nats.nc);
  const forged = await js.publish(eventSubject(runId, 'learner.step'), pack({ forged: true }), {
    msgID: keyedId(key, `${runId}:0:learner.step`),
  });
  const run = runTraining({
    nc: nats.nc,
    js,
    store,
    runId,
    spec: tinySpec(fx, { steps: 1 }),
    runDir: join(home, runId),
    threads: 1,
  });
  const err = (await run.then(
    () => null,
    (e: Error) => e,
  )) as Error | null;
  t.ok(err, 'the run fails: it never completes with a log that lacks its learner.step');
  t.match(err?.message, new RegExp(`event ${runId}:0:learner\\.step was not stored: .*seq ${forged.seq}`));
  t.notMatch(err?.message ?? '', /\n/, 'in one line');
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  const started = events.find((e) => e.type === 'run.started');
  t.equal(started?.type === 'run.started' && started.data.config.messageIds, 'run-key');
  const finished = events.filter((e) => e.type === 'run.finished');
  t.same(
    finished.map((e) => e.type === 'run.finished' && e.data.status),
    ['failed'],
    'run.finished says failed',
  );
  t.equal((await kv.get(`${runId}.status`))?.string(), 'failed');
  t.notOk(auditPassed(auditRun(events)), 'and the audit of the log fails');
});

t.test('akbe train whose learner.step id was taken exits non-zero, in one line', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  await EventStore.open(nats.nc);
  const dir = mkdtempSync(join(tmpdir(), 'akbe-msgid-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const runId = 'msgid-cli';
  // Whoever holds the orchestrator's seed can compute its ids: taken, the event is not stored.
  const key = credentialMessageKey(seedOf(nats, 'orchestrator'), runId);
  await jetstream(nats.nc).publish(eventSubject(runId, 'rollout.completed'), pack({ forged: true }), {
    msgID: keyedId(key, `${runId}:0:learner.step`),
  });
  const config = join(dir, 'tiny.json');
  const cfg = { ...TINY_TRAIN, steps: 1, world: fx.worldDir, policy: fx.policyDir, evalQuestions: 0 };
  writeFileSync(config, JSON.stringify(cfg));
  const r = await runCli(
    ...[
      'train',
      '--config',
      config,
      '--run-id',
      runId,
      '--nats',
      nats.server.url,
      '--home',
      join(dir, 'home'),
    ],
  );
  t.not(r.code, 0, 'the run does not exit 0');
  const lines = r.err.split('\n').filter((l) => l.includes(`event ${runId}:0:learner.step was not stored`));
  t.equal(lines.length, 1, r.err);
});
