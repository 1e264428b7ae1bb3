/**
 * Issue 7 acceptance (cluster): two rollout worker processes serve a run whose orchestrator runs
 * only the services; one worker is SIGKILLed mid-step. The step completes, no rollout is lost or
 * counted twice (its rollouts are redelivered to the other worker), and the log audits clean.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { rolloutConsumerName } from '../src/actors/rollout/protocol.js';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { COMMAND_STREAM } from '../src/events/subjects.js';
import { KILL_AT_ENV } from '../src/util/kill-point.js';
import { startCli } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

t.test('a rollout worker killed mid-step: the step completes and every rollout counts once', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-cluster-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'cluster1';
  const spec = tinySpec(fx, { steps: 1, batchQuestions: 3, gWithTool: 2, gNoTool: 2 });
  const worker = (env: NodeJS.ProcessEnv = {}) =>
    startCli(
      [
        'worker',
        '--run-id',
        runId,
        '--role',
        'rollout',
        '--concurrency',
        '2',
        '--nats',
        nats.server.url,
        '--home',
        home,
      ],
      env,
    );
  // Worker 0 serves alone at first and kills itself (kill point rollout-start:0) once its first
  // rollout.started is stored, so it holds taken, unacked rollouts when it dies. A kill timed
  // from outside raced the run: on an idle machine worker 0 finished the whole tiny step first.
  const workers = [worker({ [KILL_AT_ENV]: 'rollout-start:0' })];
  t.teardown(() => {
    for (const [i, w] of workers.entries()) {
      w.child.kill('SIGKILL');
      if (!t.passing()) process.stderr.write(`--- worker ${i}:\n${w.output()}\n`);
    }
  });
  const killer = (async () => {
    const code = await workers[0].exited;
    workers.push(worker());
    return code;
  })();
  const training = runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec,
    runDir: join(home, 'runs', runId),
    roles: ['search', 'policy', 'trainer'],
    dispatch: { ackWaitMs: 4_000, maxDeliver: 10 },
    threads: 1,
  });
  const result = await training;
  t.equal(await killer, null, 'worker 0 died of SIGKILL');
  t.match(workers[0].output(), /killing this process at rollout-start:0/, 'at its kill point');
  t.equal(result.steps, 1, 'the step completed');

  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  const rollouts = events.filter((e) => e.type === 'rollout.completed');
  const perStep = spec.train.batchQuestions * (spec.train.gWithTool + spec.train.gNoTool);
  t.equal(rollouts.length, perStep, 'every rollout stored once');
  t.equal(new Set(rollouts.map((e) => e.meta.rolloutId)).size, perStep, 'no rollout lost or duplicated');
  const info = await store.jsm.consumers.info(COMMAND_STREAM, rolloutConsumerName(runId));
  t.equal(info.num_ack_pending, 0, 'every command acked');
  // Worker 1 leaves on its own once the run's status is completed, and reports what it served.
  const exit1 = await Promise.race([
    workers[1].exited,
    new Promise((r) => setTimeout(() => r('timeout'), 30_000).unref()),
  ]);
  t.equal(exit1, 0, 'worker 1 left when the run completed');
  const m = /stopped \((\d+) rollouts, (\d+) redelivered to it\)/.exec(workers[1].output());
  t.ok(m, 'worker 1 reported its rollouts');
  t.ok(Number(m?.[2]) >= 1, `worker 0's unfinished rollouts were redelivered to worker 1 (${m?.[2]})`);
  const audit = auditRun(events);
  t.same(audit.mismatches, [], 'the log audits clean');
  t.equal(audit.checked.rollouts, perStep);
});
