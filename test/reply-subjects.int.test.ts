/**
 * Issue 23 item 2 (the confused deputy): a requester needs no permission on its reply subject, and
 * in the default single-process setup the services answer on the orchestrator's connection, which
 * may publish anywhere. So a rollout key sending a search request whose reply subject is
 * `$JS.API.STREAM.PURGE.AKBE_EVENTS` had the search service's answer purge the event log. Against
 * a real secured nats-server and the real search role: such requests (valid, and
 * garbage that gets an error answer) are refused without answering, dead-lettered with the reason,
 * and the log keeps every event; an inbox reply still gets its answer. Planted: the inbox check
 * removed -> the stream is purged and this test fails. Since the rollout role has an account of
 * its own (nats-accounts.ts), its request reaches the service with a server-mapped `_R_.` reply:
 * the purge lands in the rollout account, where there is no JetStream; the inbox check is then
 * exercised by a requester inside the services' account.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { createEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { serviceSubject } from '../src/events/subjects.js';
import { withNats } from './helpers/nats.js';
import { startTinyRoles } from './helpers/tiny-roles.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

const fx = await tinyRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const home = mkdtempSync(join(tmpdir(), 'akbe-reply-'));
t.teardown(() => rmSync(home, { recursive: true, force: true }));
const runId = 'reply-run';

// The services on the orchestrator's connection, as `akbe train` runs them by default.
const { started } = await startTinyRoles(nats.nc, store, fx, home, runId, tinySpec(fx), ['search']);
t.teardown(() => started.stop());
await store.append(
  createEvent(
    'step.started',
    { questionIds: ['q0'], step: 0, policyVersion: 0 },
    { runId, step: 0, policyVersion: 0 },
  ),
);
const before = await store.lastSeq(runId);

const settle = () => new Promise((r) => setTimeout(r, 500));

/**
 * A search request whose reply subject is the event stream's purge: a valid one (its answer would
 * be the purge request) and garbage (its error answer would be).
 */
async function askSearchToPurge(attacker: NatsConnection): Promise<void> {
  const purge = '$JS.API.STREAM.PURGE.AKBE_EVENTS';
  const search = serviceSubject(runId, 'search');
  attacker.publish(search, JSON.stringify({ queries: ['who founded the city'], topk: 2 }), { reply: purge });
  attacker.publish(search, 'not json', { reply: purge });
  await attacker.flush();
  await settle();
}

t.test('a rollout key: its reply subject is mapped by its account, the purge lands nowhere', async (t) => {
  // The rollout role's account (nats-accounts.ts) reaches svc.search through a service import:
  // the server hands the service a `_R_.` reply that leads back to the rollout account only.
  const attacker = await nats.connectAs('rollout');
  t.teardown(() => attacker.close());
  await askSearchToPurge(attacker);
  t.equal(await store.lastSeq(runId), before, 'the event log kept its events');
});

t.test('a reply subject that is not an inbox is never answered', async (t) => {
  // A requester in the services' own account (here the orchestrator's connection itself): the
  // service's inbox check is what keeps it from publishing the purge.
  const attacker = nats.nc;
  await askSearchToPurge(attacker);
  t.equal(await store.lastSeq(runId), before, 'the event log kept its events (inbox check)');
  const letters = [];
  for await (const d of store.deadLetters(runId)) letters.push(d);
  const refused = letters.filter((d) => /is not an inbox/.test(d.detail));
  t.equal(refused.length, 2, 'each one dead-lettered with the reason');
  t.match(refused[0].detail, /reply subject \$JS\.API\.STREAM\.PURGE\.AKBE_EVENTS is not an inbox/);
});

t.test('an inbox reply is answered as before', async (t) => {
  const client = await nats.connectAs('rollout');
  t.teardown(() => client.close());
  const reply = await client.request(
    serviceSubject(runId, 'search'),
    JSON.stringify({ queries: ['who founded the city'], topk: 2 }),
    { timeout: 10_000 },
  );
  const body = JSON.parse(new TextDecoder().decode(reply.data));
  t.ok(Array.isArray(body.results), `search answered: ${JSON.stringify(body).slice(0, 80)}`);
});
