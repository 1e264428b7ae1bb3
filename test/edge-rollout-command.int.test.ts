/**
 * Issue 11 item 2 (reproduction): one malformed `cmd.rollout` message published onto a live run's
 * work queue used to kill the whole run (uncaught TypeError, exit 134). Now the rollout worker
 * validates every command at the edge and dead-letters a bad one with its reason; the run finishes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { pack } from '../src/actors/nats/wire.js';
import { EventStore } from '../src/events/store.js';
import { commandSubject } from '../src/events/subjects.js';
import { startCli } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

t.test('a malformed cmd.rollout is dead-lettered and the run finishes', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-evil-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'evil1';
  const config = join(home, 'tiny.json');
  writeFileSync(
    config,
    JSON.stringify({ ...TINY_TRAIN, steps: 2, world: fx.worldDir, policy: fx.policyDir, evalQuestions: 0 }),
  );
  // Follow the log from before the run starts and publish the bad command the moment step 0
  // starts: it then sits in the queue ahead of step 1's commands, so a worker must take it
  // before the run can finish (a 1-step run polled by full replays finished first on an idle
  // machine, leaving the bad command unread).
  const follow = new AbortController();
  t.teardown(() => follow.abort());
  const step0Started = (async () => {
    for await (const { event } of store.replay(runId, { follow: true, signal: follow.signal }))
      if (event.type === 'step.started') return true;
    return false;
  })();
  const run = startCli([
    'train',
    '--config',
    config,
    '--run-id',
    runId,
    '--nats',
    nats.server.url,
    '--home',
    home,
  ]);
  t.teardown(() => run.child.kill('SIGKILL'));
  t.ok(await step0Started, 'step 0 started');
  follow.abort();
  const js = jetstream(nats.nc);
  await js.publish(commandSubject(runId, 'rollout'), pack({ runId, step: 0, input: { rolloutId: 'evil' } }));
  const code = await run.exited;
  t.equal(code, 0, `the run finished (exit ${code}):\n${run.output().slice(-2000)}`);
  const letters = [];
  for await (const d of store.deadLetters(runId)) letters.push(d);
  const evil = letters.filter((d) => d.originalSubject === commandSubject(runId, 'rollout'));
  t.equal(evil.length, 1, 'the bad command is dead-lettered once');
  t.equal(evil[0]?.reason, 'invalid');
  t.match(evil[0]?.detail, /input\./, 'the reason names the bad field');
});
