/**
 * Issue 11 item 6 (resume after a kill at any point): `akbe train` SIGKILLs itself at a test-only
 * kill point (src/util/kill-point.ts) inside labelling, training or publishing; `akbe train
 * --resume` finishes the run and the log audits clean. Reproduces the finding that a kill during
 * step 2's labels gave `learner.step boundaryShifts recorded 0, recomputed 1` (the resume fold
 * counted labels of the step being redone). The resumed run keeps the run's recorded eval settings
 * (it ran a 32-question eval although the run was started with evalQuestions: 0).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { KILL_AT_ENV } from '../src/util/kill-point.js';
import { startCli } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { baseRunFixture, TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

// labels:2 runs the committed base (its labels vary, so a wrong resume fold shows as a boundary
// shift); the tiny policy is enough for the other points.
const POINTS = [
  { at: 'labels:2', steps: 3, before: 'learner.step', base: true },
  { at: 'train:1', steps: 2, before: 'learner.step', base: false },
  { at: 'publish:1', steps: 2, before: 'policy.published', base: false },
] as const;

for (const p of POINTS) {
  t.test(`killed at ${p.at}, resumed: the run finishes and audits clean`, async (t) => {
    const fx = p.base ? await baseRunFixture() : await tinyRunFixture();
    const nats = await withNats(t);
    const store = await EventStore.open(nats.nc);
    const home = mkdtempSync(join(tmpdir(), 'akbe-kill-'));
    t.teardown(() => rmSync(home, { recursive: true, force: true }));
    const runId = `kill-${p.at.replace(':', '-')}`;
    const config = join(home, 'tiny.json');
    const train = {
      ...TINY_TRAIN,
      steps: p.steps,
      ...(p.base ? { batchQuestions: 6, miniBatchQuestions: 3 } : {}),
    };
    writeFileSync(
      config,
      JSON.stringify({ ...train, world: fx.worldDir, policy: fx.policyDir, evalQuestions: 0 }),
    );
    const flags = ['--run-id', runId, '--nats', nats.server.url, '--home', home];
    const first = startCli(['train', '--config', config, ...flags], { [KILL_AT_ENV]: p.at });
    t.teardown(() => first.child.kill('SIGKILL'));
    t.equal(await first.exited, null, `killed itself at ${p.at}:\n${first.output().slice(-1500)}`);
    const events = async () => {
      const out: AkbeEvent[] = [];
      for await (const { event } of store.replay(runId)) out.push(event);
      return out;
    };
    const step = Number(p.at.split(':')[1]);
    const atKill = await events();
    t.notOk(
      atKill.some((e) => e.type === p.before && e.meta.step === step),
      `killed before step ${step}'s ${p.before}`,
    );
    if (p.at.startsWith('labels'))
      t.ok(
        atKill.some((e) => e.type === 'boundary.labeled' && e.meta.step === step),
        `some of step ${step}'s labels were stored`,
      );

    // One resume under another thread count than run.started recorded: it says so in a line.
    const threads = p.at === 'train:1' ? ['--threads', '2'] : [];
    const resumed = startCli(['train', '--resume', ...flags, ...threads]);
    t.teardown(() => resumed.child.kill('SIGKILL'));
    t.equal(await resumed.exited, 0, `the resumed run finished:\n${resumed.output().slice(-1500)}`);
    if (threads.length)
      t.match(resumed.output(), /trainer runtime differs from run\.started's \(intraOpThreads 1 -> 2\)/);
    else t.notMatch(resumed.output(), /trainer runtime differs/, 'the same runtime: no line');
    // The run was started with evalQuestions: 0; `--resume` (no --config) must not fall back to
    // the default 32-question dev evaluation.
    t.notMatch(resumed.output(), /eval (before|after)/, "the resumed run keeps the run's eval settings");
    const all = await events();
    const count = (type: AkbeEvent['type']) => all.filter((e) => e.type === type).length;
    t.equal(count('learner.step'), p.steps, 'one learner.step per step');
    t.equal(count('boundary.labeled'), p.steps * train.batchQuestions!, 'labels written once');
    t.same(
      all
        .filter((e) => e.type === 'policy.published')
        .map((e) => e.type === 'policy.published' && e.data.version),
      Array.from({ length: p.steps }, (_, i) => i + 1),
      'each version published once',
    );
    t.equal(count('run.finished'), 1);
    if (p.base)
      t.ok(
        all.some((e) => e.type === 'learner.step' && e.data.metrics.boundaryShifts > 0),
        `questions changed category across steps (the fold is exercised): shifts ${all.filter((e) => e.type === 'learner.step').map((e) => e.type === 'learner.step' && e.data.metrics.boundaryShifts)}`,
      );
    const audit = auditRun(all);
    t.same(audit.mismatches, [], 'the resumed log audits clean');
    t.equal(audit.checked.steps, p.steps);
  });
}
