/**
 * The completion watcher when NATS goes away under it (issue 11 item 6: no wait without an end).
 * Its follow loop ends quietly when the connection closes; every rollout waited for, and every
 * later wait, must then fail at once instead of waiting for a completion that can never come.
 */
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { CompletionWatcher } from '../src/actors/orchestrator/dispatch.js';
import { EventStore } from '../src/events/store.js';
import { withNats } from './helpers/nats.js';

const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms))]);

t.test('a lost connection fails the pending and later waits', async (t) => {
  const nats = await withNats(t);
  await EventStore.open(nats.nc);
  const nc = await nats.connectAs('orchestrator');
  const watcher = new CompletionWatcher(jetstream(nc), 'lost-watch');
  const errors: string[] = [];
  await watcher.start((err) => errors.push(err.message));
  const pending = watcher.wait('s0.q1.wt0').then(
    () => 'completed',
    (e: Error) => e.message,
  );
  t.same(watcher.pending(), ['s0.q1.wt0']);
  await nc.close();
  t.match(await within(pending, 10_000), /completion stream ended|closed/, 'the pending wait fails');
  t.same(watcher.pending(), [], 'nothing left waiting');
  t.equal(errors.length, 1, 'the owner is told once');
  const later = await within(
    watcher.wait('s0.q2.wt0').catch((e: Error) => e.message),
    1_000,
  );
  t.match(later, /completion stream ended|closed/, 'a later wait fails at once');
  await watcher.stop();
});

t.test('stopping the watcher is not a failure', async (t) => {
  const nats = await withNats(t);
  await EventStore.open(nats.nc);
  const watcher = new CompletionWatcher(jetstream(nats.nc), 'stop-watch');
  const errors: string[] = [];
  await watcher.start((err) => errors.push(err.message));
  await watcher.stop();
  t.same(errors, [], 'no error reported for our own stop');
});
