/**
 * Issue 11 item 3: no wait without an end. A rollout that uses up its delivery attempts used to
 * make the run hang forever with no message; now the run stops with a one-line error naming the
 * rollout and the cause, recorded as run.finished (failed, with the reason). A run with no rollout
 * worker at all stops at its stall deadline with an error that says what to start.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { respondError } from '../src/actors/nats/wire.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { RolloutGaveUpError, RolloutsStalledError } from '../src/actors/orchestrator/rollout-deadlines.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { serviceSubject } from '../src/events/subjects.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

t.test('a rollout out of delivery attempts stops the run with its name and cause', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-gaveup-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'gaveup1';
  // A policy service that refuses every request (the real wire protocol): every rollout fails.
  const rogue = nats.nc.subscribe(serviceSubject(runId, 'generate'), {
    callback: (_e, msg) => respondError(msg, new Error('policy unavailable')),
  });
  t.teardown(() => rogue.unsubscribe());
  const t0 = Date.now();
  const err = await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec: tinySpec(fx, { steps: 1 }),
    runDir: join(home, runId),
    roles: ['search', 'trainer', 'rollout'],
    dispatch: { maxDeliver: 2, ackWaitMs: 5_000 },
    threads: 1,
  }).catch((e: Error) => e);
  t.type(err, RolloutGaveUpError);
  t.match(
    (err as Error).message,
    /^run gaveup1: rollout s0\.\S+ gave up after its delivery attempts: s0\.\S+ failed \(delivery 2 of 2\): .*policy unavailable/,
  );
  t.notMatch((err as Error).message, /\n/, 'one line');
  t.ok(Date.now() - t0 < 60_000, `stopped in ${Date.now() - t0} ms`);
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  const finished = events.find((e) => e.type === 'run.finished');
  t.equal(finished?.type === 'run.finished' && finished.data.status, 'failed', 'recorded as a failed run');
  t.equal(
    finished?.type === 'run.finished' && finished.data.reason,
    (err as Error).message,
    'with the reason',
  );
});

t.test('a run with no rollout worker stops at its stall deadline', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-stall-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const err = await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId: 'stall1',
    spec: tinySpec(fx, { steps: 1 }),
    runDir: join(home, 'stall1'),
    roles: ['search', 'policy', 'trainer'],
    stallTimeoutMs: 3_000,
    threads: 1,
  }).catch((e: Error) => e);
  t.type(err, RolloutsStalledError);
  t.match(
    (err as Error).message,
    /no rollout completed for 3 s while 8 are awaited \(e\.g\. s0\..*akbe worker --run-id stall1/,
  );
});
