/**
 * Issue 21 item 6: a transient timeout of something a training step waits on (here the
 * checkpoint upload to the object store, AKBE_TEST_FAULT_AT in src/util/kill-point.ts) is retried
 * within the step, on a single server too, and the run finishes; a failure that persists ends the
 * run with run.finished failed and the reason in its log, and `akbe train` exits 1 with it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { TIMEOUT_RETRY_ENV } from '../src/events/retry.js';
import { EventStore } from '../src/events/store.js';
import { FAULT_AT_ENV } from '../src/util/kill-point.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';
import { TINY_TRAIN, tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

delete process.env.NATS_URL;
const fx = await tinyRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const home = mkdtempSync(join(tmpdir(), 'akbe-faults-'));
t.teardown(() => {
  delete process.env[FAULT_AT_ENV];
  delete process.env[TIMEOUT_RETRY_ENV];
  rmSync(home, { recursive: true, force: true });
});

async function logOf(runId: string): Promise<AkbeEvent[]> {
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  return events;
}

// The fault counter is per process and per version: this test runs first, before `always`.
t.test('a timed-out checkpoint upload is retried within the step; the run finishes', async (t) => {
  process.env[FAULT_AT_ENV] = 'upload:1:2'; // step 0's checkpoint, v1: its first two puts time out
  const r = await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId: 'fault1',
    spec: tinySpec(fx, { steps: 1 }),
    runDir: join(home, 'fault1'),
    threads: 1,
  });
  t.equal(r.policyVersion, 1);
  const events = await logOf('fault1');
  t.equal(events.filter((e) => e.type === 'learner.step').length, 1, 'the step trained once');
  const last = events.at(-1);
  t.equal(last?.type === 'run.finished' && last.data.status, 'completed');
});

t.test('an upload that never succeeds: run.finished failed with the reason, exit 1', async (t) => {
  process.env[FAULT_AT_ENV] = 'upload:1:always';
  process.env[TIMEOUT_RETRY_ENV] = '0'; // the fewest tries (4), not 90 s of them
  const config = join(home, 'tiny.json');
  writeFileSync(
    config,
    JSON.stringify({ ...TINY_TRAIN, steps: 1, world: fx.worldDir, policy: fx.policyDir, evalQuestions: 0 }),
  );
  const url = nats.server.url;
  const r = await runCli('train', '--config', config, '--run-id', 'fault2', '--home', home, '--nats', url);
  t.equal(r.code, 1, 'akbe train exits 1');
  const line = r.err.trimEnd().split('\n').at(-1) ?? '';
  const reason = /store fault2\/v1\/\S+: no answer in 4 tries over \d+ s \(TimeoutError: timeout/;
  t.match(line, reason, line);
  const last = (await logOf('fault2')).at(-1);
  t.equal(last?.type, 'run.finished', 'the log ends with run.finished');
  if (last?.type !== 'run.finished') return;
  t.equal(last.data.status, 'failed');
  t.match(last.data.reason, reason);
  t.notMatch(last.data.reason, /\n/, 'one line');
  const runs = await runCli('runs', '--nats', url);
  t.match(runs.out, /fault2.*failed/, '`akbe runs` shows it failed, not running');
});
