/**
 * Issue 13 acceptance: a rollout worker killed during an asynchronous run (maxStaleness 1). Two
 * rollout worker processes serve a 3-step run whose orchestrator runs only search and policy; the
 * trainer is a process of its own (`akbe worker --role trainer`), so the step that trains while the
 * next one rolls out does so across processes, as in a cluster; worker 0
 * serves alone and kills itself (kill point rollout:2, src/util/kill-point.ts) right after storing
 * its first rollout of step 2, before acking it, while step 1 is still in flight: step 2 rolls out
 * on v1 beside step 1's training. Worker 1 takes over the redelivered rollouts; every step trains,
 * no rollout is lost or stored twice, every command is acked, and the log audits clean.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { seedPath } from '../src/actors/nats/nats-auth.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { rolloutConsumerName } from '../src/actors/rollout/protocol.js';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { COMMAND_STREAM } from '../src/events/subjects.js';
import { KILL_AT_ENV } from '../src/util/kill-point.js';
import { startCli } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

t.test('a rollout worker killed mid-run at maxStaleness 1: nothing lost, the log audits clean', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-async-kill-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'asynckill';
  const spec = tinySpec(fx, { steps: 3, maxStaleness: 1 });
  const worker = (env: NodeJS.ProcessEnv = {}, role = 'rollout') =>
    startCli(
      [
        'worker',
        '--run-id',
        runId,
        '--role',
        role,
        '--concurrency',
        '2',
        '--nats',
        nats.server.url,
        '--home',
        home,
      ],
      env,
    );
  const workers = [worker({ [KILL_AT_ENV]: 'rollout:2' })];
  const trainer = worker({}, 'trainer');
  t.teardown(() => {
    trainer.child.kill('SIGKILL');
    if (!t.passing()) process.stderr.write(`--- trainer:\n${trainer.output()}\n`);
    for (const [i, w] of workers.entries()) {
      w.child.kill('SIGKILL');
      if (!t.passing()) process.stderr.write(`--- worker ${i}:\n${w.output()}\n`);
    }
  });
  const killed = (async () => {
    const code = await workers[0].exited;
    workers.push(worker());
    return code;
  })();
  const result = await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec,
    runDir: join(home, 'runs', runId),
    roles: ['search', 'policy'],
    dispatch: { ackWaitMs: 4_000, maxDeliver: 10 },
    threads: 1,
    // Signed as `akbe train` signs: the trainer process checks them against run.started.trainSigner.
    signingSeed: new TextEncoder().encode(
      readFileSync(seedPath(nats.authDir, 'orchestrator'), 'utf8').trim(),
    ),
  });
  t.equal(await killed, null, 'worker 0 died of SIGKILL');
  t.match(workers[0].output(), /killing this process at rollout:2/);
  t.same([result.steps, result.policyVersion], [3, 3], 'every step trained');

  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  const rollouts = events.filter((e) => e.type === 'rollout.completed');
  const total = 3 * spec.train.batchQuestions * (spec.train.gWithTool + spec.train.gNoTool);
  t.equal(rollouts.length, total, 'every rollout stored once');
  t.equal(new Set(rollouts.map((e) => e.meta.rolloutId)).size, total, 'no rollout lost or duplicated');
  const steps = events.filter((e) => e.type === 'learner.step') as EventOf<'learner.step'>[];
  t.same(
    steps.map((e) => [e.meta.step, e.data.policyVersionBefore, e.data.rolloutVersion]),
    [
      [0, 0, 0],
      [1, 1, 0],
      [2, 2, 1],
    ],
    'steps 1 and 2 trained on one-version-old rollouts',
  );
  const info = await store.jsm.consumers.info(COMMAND_STREAM, rolloutConsumerName(runId));
  t.equal(info.num_ack_pending, 0, 'every command acked');
  const exit1 = await Promise.race([
    workers[1].exited,
    new Promise((r) => setTimeout(() => r('timeout'), 30_000).unref()),
  ]);
  t.equal(exit1, 0, 'worker 1 left when the run completed');
  t.match(trainer.output(), /serving run asynckill as trainer/, 'the trainer ran in its own process');
  const m = /stopped \((\d+) rollouts, (\d+) redelivered to it\)/.exec(workers[1].output());
  t.ok(Number(m?.[2]) >= 1, `worker 0's unacked rollouts were redelivered to worker 1 (${m?.[2]})`);
  const audit = auditRun(events);
  t.same(audit.mismatches, [], JSON.stringify(audit.mismatches.slice(0, 3)));
  t.same(audit.errors, []);
  t.equal(audit.checked.rollouts, total);
});
