/**
 * An asynchronous training run (maxStaleness 1, issue 13): the tiny world and policy train 3 steps
 * through a real nats-server. Step j rolls out on version max(0, j - 1) while step j - 1 trains, so
 * steps 1 and 2 train on rollouts one version old (read from the log, not from the code); no
 * trained row is older than η; the log audits clean, re-plays through the machines, and
 * `akbe replay` reports it clean and shows each label's version.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import type { InspectionEvent } from 'xstate';
import { replayRun } from '../src/actors/inspect/inspect-replay.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { auditRunLog } from '../src/audit/audit.js';
import { foldRunLog } from '../src/audit/run-log.js';
import { fillSegments } from '../src/audit/segments.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { readWorldTokenizer } from '../src/world/files.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';
import { baseRunFixture, tinySpec } from './helpers/tiny-run.js';
import { assertVerifies } from './helpers/verify.js';

delete process.env.NATS_URL;
process.env.CI = 'true';

const ETA = 1;
const fx = await baseRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const runDir = mkdtempSync(join(tmpdir(), 'akbe-async-train-'));
// What the inspector is sent: the order in which question actors start and finish.
const lifecycle: string[] = [];
const inspect = (ev: InspectionEvent) => {
  const id = (ev.actorRef as { id?: string }).id ?? '';
  if (!id.startsWith('question.')) return;
  if (ev.type === '@xstate.actor') lifecycle.push(`start ${id}`);
  if (ev.type === '@xstate.snapshot' && (ev.snapshot as { status?: string }).status === 'done')
    lifecycle.push(`done ${id}`);
};
t.teardown(() => rmSync(runDir, { recursive: true, force: true }));
const result = await runTraining({
  nc: nats.nc,
  js: jetstream(nats.nc),
  store,
  runId: 'async',
  spec: tinySpec(fx, { steps: 3, maxStaleness: ETA }),
  runDir,
  concurrency: 8,
  threads: 1,
  inspect,
});
const events: AkbeEvent[] = [];
for await (const { event } of store.replay('async')) events.push(event);
const fresh = (): AkbeEvent[] => structuredClone(events);
const ofType = <T extends AkbeEvent['type']>(type: T) =>
  events.filter((e) => e.type === type) as EventOf<T>[];

t.test('steps 1 and 2 trained on rollouts of the version before the one they trained from', async (t) => {
  t.same([result.steps, result.policyVersion], [3, 3]);
  const steps = ofType('learner.step');
  t.same(
    steps.map((e) => [e.meta.step, e.data.policyVersionBefore, e.data.rolloutVersion, e.data.dropped]),
    [
      [0, 0, 0, []],
      [1, 1, 0, []],
      [2, 2, 1, []],
    ],
  );
  const versionOf = new Map(ofType('rollout.completed').map((e) => [e.meta.rolloutId, e.meta.policyVersion]));
  for (const e of steps) {
    const rows = e.data.batch?.rows ?? [];
    t.ok(rows.length > 0, `step ${e.meta.step}: rows recorded`);
    // The rows' own rollout.completed versions: never more than η behind the version trained from.
    const ages = rows.map((r) => e.data.policyVersionBefore - (versionOf.get(r.rolloutId) ?? -99));
    t.ok(
      ages.every((a) => a >= 0 && a <= ETA),
      `step ${e.meta.step}: row ages ${[...new Set(ages)]}`,
    );
    if (e.meta.step > 0)
      t.ok(
        ages.every((a) => a === 1),
        `step ${e.meta.step} trained on v${e.meta.step - 1} rows`,
      );
  }
  // Pipelining: step 1's questions were out before step 0 had published v1.
  const seq = (e: AkbeEvent | undefined) => e?.meta.seq ?? Number.POSITIVE_INFINITY;
  const started1 = ofType('step.started').find((e) => e.meta.step === 1);
  const published1 = ofType('policy.published').find((e) => e.data.version === 1);
  t.ok(seq(started1) < seq(published1), 'step 1 opened before v1 was published');
  for (const l of ofType('boundary.labeled'))
    t.equal(l.meta.policyVersion, Math.max(0, l.meta.step - ETA), `label s${l.meta.step} names its version`);
});

t.test('the inspector sees the steps overlap: step 1 questions live beside step 0 ones', async (t) => {
  const firstStep1 = lifecycle.findIndex((x) => x.startsWith('start question.s1.'));
  const lastStep0Done = lifecycle.findLastIndex((x) => x.startsWith('done question.s0.'));
  t.ok(firstStep1 >= 0 && lastStep0Done >= 0, lifecycle.slice(0, 8).join(', '));
  t.ok(firstStep1 < lastStep0Done, 'a step 1 question started before step 0 finished rolling out');
});

t.test('the asynchronous run audits clean and re-plays through the machines', async (t) => {
  const log = foldRunLog(fresh());
  const tok = await readWorldTokenizer(fx.worldDir);
  t.equal(
    fillSegments(log, (ids) => tok.decode(ids)),
    0,
  );
  const r = auditRunLog(log);
  t.same(r.mismatches, [], JSON.stringify(r.mismatches.slice(0, 5)));
  t.same(r.errors, []);
  t.equal(r.settings.maxStaleness, ETA);
  t.equal(r.checked.steps, 3);
  const replay = await replayRun(log);
  t.same(replay.divergences, []);
  t.equal(replay.steps, 3);
});

t.test('a tampered record of the staleness is found', async (t) => {
  const copy = fresh();
  const e = copy.find((x) => x.type === 'learner.step' && x.meta.step === 2) as EventOf<'learner.step'>;
  e.data.rolloutVersion = 2;
  e.data.dropped = [{ questionId: 'x', step: 2, policyVersion: 0, trainVersion: 2, reason: 'too-stale' }];
  const r = auditRunLog(foldRunLog(copy));
  t.same(
    r.mismatches.map((m) => m.field).sort(),
    ['dropped', 'rolloutVersion'],
    JSON.stringify(r.mismatches),
  );
  // A step opened on a version the rule does not give (v2 for step 2 at η 1).
  const other = fresh();
  const s = other.find((x) => x.type === 'step.started' && x.meta.step === 2) as EventOf<'step.started'>;
  s.data.policyVersion = 2;
  const fields = auditRunLog(foldRunLog(other)).mismatches.map((m) => m.field);
  t.ok(fields.includes('policyVersion (maxStaleness rule)'), fields.join());
});

t.test('akbe replay --verify-training: the decoupled steps re-derive every published version', async (t) => {
  await assertVerifies(t, { runId: 'async', natsUrl: nats.server.url, home: runDir, steps: 3 });
});

t.test('akbe replay: clean, and --question shows the version each label describes', async (t) => {
  const r = await runCli('replay', '--run', 'async', '--rerun', '--nats', nats.server.url);
  t.equal(r.code, 0, r.out + r.err);
  t.match(r.out, /replay of run async: clean/);
  t.match(
    r.err,
    /re-ran 3 steps \(\d+ facts\), identical to the log/,
    'akbe replay --rerun re-ran the machines',
  );
  t.notMatch(r.err, /tokenizer is unreadable/, 'spans re-derived with the run tokenizer');
  const label = ofType('boundary.labeled').find((e) => e.meta.step === 2)!;
  const q = await runCli(
    'replay',
    '--run',
    'async',
    '--question',
    label.meta.questionId,
    '--nats',
    nats.server.url,
  );
  t.equal(q.code, 0, q.err);
  t.match(q.out, new RegExp(`\\n2\\s+v1\\s+${label.data.category}`), q.out);
});
