/**
 * Issue 11 item 6: `kill -9` of akbe's embedded nats-server mid-run ends `akbe train` with one
 * line naming the cause and the resume command (no stack trace, no hang), and the run resumes
 * from its log on a fresh server over the same store, finishing with a clean audit.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { connectAkbeNats, isNatsServerAlive, readServerRecord } from '../src/actors/nats/connection.js';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { startCli, until } from './helpers/cli-process.js';
import { TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

delete process.env.NATS_URL;

t.test('losing the embedded NATS server: one line, then the run resumes and audits clean', async (t) => {
  const fx = await tinyRunFixture();
  const home = mkdtempSync(join(tmpdir(), 'akbe-lost-'));
  t.teardown(() => {
    const rec = readServerRecord(home);
    if (rec && isNatsServerAlive(rec.pid)) process.kill(rec.pid, 'SIGKILL');
    rmSync(home, { recursive: true, force: true });
  });
  const runId = 'lost1';
  const STEPS = 3;
  const config = join(home, 'tiny.json');
  writeFileSync(
    config,
    JSON.stringify({
      ...TINY_TRAIN,
      steps: STEPS,
      world: fx.worldDir,
      policy: fx.policyDir,
      evalQuestions: 0,
    }),
  );
  const args = ['train', '--config', config, '--run-id', runId, '--home', home, '--concurrency', '8'];
  // The run stops inside step 1's training (a timed kill lands in the shutdown of a run that
  // takes a second on an idle machine): the server then dies under a run that is mid-step.
  const first = startCli(args, { AKBE_HOME: home, AKBE_TEST_HOLD_AT: 'train:1' });
  t.teardown(() => first.child.kill('SIGKILL'));
  await until('the run holds in step 1', () => /holding at train:1/.test(first.output()), 240_000);
  const record = readServerRecord(home)!;
  t.equal(record.mode, 'embedded');
  // A worker stopped by SIGTERM while the run is live exits (its status poll used to keep it
  // alive for good).
  const worker = startCli(['worker', '--run-id', runId, '--role', 'rollout', '--home', home], {
    AKBE_HOME: home,
  });
  t.teardown(() => worker.child.kill('SIGKILL'));
  await until('the worker serves the run', () => /serving run lost1/.test(worker.output()), 120_000);
  worker.child.kill('SIGTERM');
  const stopped = await Promise.race([
    worker.exited,
    new Promise((r) => setTimeout(() => r('still running after 15 s'), 15_000).unref()),
  ]);
  t.equal(stopped, 0, `a worker stopped by SIGTERM exits 0 (${stopped}): ${worker.output().slice(-300)}`);
  process.kill(record.pid, 'SIGKILL');
  const killedAt = Date.now();
  const code = await Promise.race([
    first.exited,
    new Promise((r) => setTimeout(() => r('hung'), 60_000).unref()),
  ]);
  const out = first.output();
  t.equal(code, 1, `akbe train exits 1 (${code}) within ${Date.now() - killedAt} ms`);
  const last = out.trimEnd().split('\n').at(-1) ?? '';
  t.match(last, /^akbe train: lost the NATS server .*akbe train --resume --run-id lost1/, last);
  t.notMatch(out, /\n\s+at /, 'no stack trace');

  const second = startCli([...args.filter((a) => a !== '--config' && a !== config), '--resume'], {
    AKBE_HOME: home,
  });
  t.teardown(() => second.child.kill('SIGKILL'));
  const resumed = await second.exited;
  t.equal(resumed, 0, resumed === 0 ? 'the resumed run finishes' : second.output());
  const nats = await connectAkbeNats({ home, env: { AKBE_HOME: home }, embedded: true });
  t.teardown(() => nats.close());
  const store = await EventStore.open(nats.nc);
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  t.equal(events.filter((e) => e.type === 'learner.step').length, STEPS, 'every step trained');
  t.equal(events.at(-1)?.type, 'run.finished');
  const report = auditRun(events);
  t.same(report.mismatches, [], 'the resumed log audits clean');
});
