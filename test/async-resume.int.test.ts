/**
 * Resume of an asynchronous run (maxStaleness 1): `akbe train` SIGKILLs itself at kill point
 * train:1 (step 1 training from v1 on v0 rollouts, while step 2's rollouts on v1 run), and
 * `akbe train --resume` reopens steps 1 and 2 on the versions they first had (v0 and v1: a step's
 * version is a function of its index), reuses the rollouts already stored, serves v0 beside v1
 * (loaded for decoding only), finishes, and the log audits clean.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { KILL_AT_ENV } from '../src/util/kill-point.js';
import { startCli } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

t.test('an asynchronous run killed at train:1 resumes on the versions its steps had', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-async-resume-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runId = 'async-resume';
  const config = join(home, 'tiny.json');
  const steps = 3;
  writeFileSync(
    config,
    JSON.stringify({
      ...TINY_TRAIN,
      steps,
      maxStaleness: 1,
      world: fx.worldDir,
      policy: fx.policyDir,
      evalQuestions: 0,
    }),
  );
  const flags = ['--run-id', runId, '--nats', nats.server.url, '--home', home];
  const first = startCli(['train', '--config', config, ...flags], { [KILL_AT_ENV]: 'train:1' });
  t.teardown(() => first.child.kill('SIGKILL'));
  t.equal(await first.exited, null, `killed itself at train:1:\n${first.output().slice(-1500)}`);
  const events = async () => {
    const out: AkbeEvent[] = [];
    for await (const { event } of store.replay(runId)) out.push(event);
    return out;
  };
  const atKill = await events();
  t.same(
    atKill.filter((e) => e.type === 'learner.step').map((e) => e.meta.step),
    [0],
    'step 0 trained, step 1 did not',
  );
  const stored = new Set(atKill.filter((e) => e.type === 'rollout.completed').map((e) => e.meta.rolloutId));

  const resumed = startCli(['train', '--resume', ...flags]);
  t.teardown(() => resumed.child.kill('SIGKILL'));
  t.equal(await resumed.exited, 0, `the resumed run finished:\n${resumed.output().slice(-1500)}`);
  const all = await events();
  const count = (type: AkbeEvent['type']) => all.filter((e) => e.type === type).length;
  const rollouts = all.filter((e) => e.type === 'rollout.completed');
  const perStep = TINY_TRAIN.batchQuestions! * (TINY_TRAIN.gWithTool! + TINY_TRAIN.gNoTool!);
  t.equal(rollouts.length, steps * perStep, 'every rollout stored once');
  t.ok(stored.size >= perStep, `the rollouts stored before the kill (${stored.size}) were kept`);
  const started = all.filter((e) => e.type === 'step.started') as EventOf<'step.started'>[];
  t.same(
    [...new Map(started.map((e) => [e.meta.step, e.data.policyVersion])).entries()],
    [
      [0, 0],
      [1, 0],
      [2, 1],
    ],
    'each step opened on max(0, step - 1), before and after the resume',
  );
  const learner = all.filter((e) => e.type === 'learner.step') as EventOf<'learner.step'>[];
  t.same(
    learner.map((e) => [e.meta.step, e.data.policyVersionBefore, e.data.rolloutVersion]),
    [
      [0, 0, 0],
      [1, 1, 0],
      [2, 2, 1],
    ],
  );
  t.equal(count('run.finished'), 1);
  const audit = auditRun(all);
  t.same(audit.mismatches, [], JSON.stringify(audit.mismatches.slice(0, 3)));
  t.equal(audit.checked.steps, steps);
});
