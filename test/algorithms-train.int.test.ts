/**
 * The reward-shaping baselines, dpo-akbe and offline-akbe train for real: the committed base policy
 * (its rewards vary, so the shapings have something to shape and questions get targets) trains 2
 * tiny steps with `otc-po`, `beta-grpo`, `dpo-akbe` and `offline-akbe` (frozen policy: the base
 * itself) through a real nats-server, and each log audits clean (rewards, labels, advantages,
 * trained rows, DPO pairs and offline records recomputed per algorithm). grpo and
 * akbe are covered the same way by audit-train.int.test.ts.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t, { type Test } from 'tap';
import { replayRun } from '../src/actors/inspect/inspect-replay.js';
import { offlineTargets } from '../src/actors/orchestrator/offline-targets.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { readRunSpec } from '../src/actors/roles/roles.js';
import { auditRunLog } from '../src/audit/audit.js';
import { foldRunLog } from '../src/audit/run-log.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { loadPlugins } from '../src/plugins/plugins.js';
import { worldEnvironment } from '../src/text/environment.js';
import { readQuestions, readWorldTokenizer } from '../src/world/files.js';
import { withNats } from './helpers/nats.js';
import { baseRunFixture, tinySpec } from './helpers/tiny-run.js';
import { assertVerifies } from './helpers/verify.js';

delete process.env.NATS_URL;
process.env.CI = 'true';

const fx = await baseRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const runDir = mkdtempSync(join(tmpdir(), 'akbe-algos-'));
t.teardown(() => rmSync(runDir, { recursive: true, force: true }));

for (const algo of ['otc-po', 'beta-grpo']) {
  t.test(`${algo}: 2 tiny steps train and audit clean`, async (t) => {
    const runId = `alg-${algo}`;
    await runTraining({
      nc: nats.nc,
      js: jetstream(nats.nc),
      store,
      runId,
      spec: tinySpec(fx, { algo, batchQuestions: 4, miniBatchQuestions: 2, gWithTool: 4 }),
      runDir: join(runDir, runId),
      concurrency: 8,
      threads: 1,
    });
    const events: AkbeEvent[] = [];
    for await (const { event } of store.replay(runId)) events.push(event);
    const started = events.find((e) => e.type === 'run.started');
    t.equal(started?.data.algo, algo);
    const r = auditRunLog(foldRunLog(events));
    t.same(r.mismatches, [], JSON.stringify(r.mismatches.slice(0, 5)));
    t.same(r.settings.defaulted, [], 'every setting read from run.started');
    t.equal(r.settings.algo, algo);
    t.equal(r.checked.steps, 2);
    t.ok(r.checked.rows >= 2 * 4 * 4, 'every with-tool row of both steps recomputed');
    const rows = events.flatMap((e) => (e.type === 'learner.step' ? (e.data.batch?.rows ?? []) : []));
    t.notOk(
      rows.some((x) => x.akbe),
      'a reward-shaping baseline trains no AKBE target',
    );
    if (algo === 'beta-grpo') await spansRederive(t, events);
  });
}

t.test(
  'a plugin algorithm (examples/plugins/search-cost.js) trains, is recorded and audits clean',
  async (t) => {
    const runId = 'alg-plugin';
    const plugins = await loadPlugins(['examples/plugins/search-cost.js'], resolve('.'));
    await runTraining({
      nc: nats.nc,
      js: jetstream(nats.nc),
      store,
      runId,
      spec: {
        ...tinySpec(fx, { algo: 'grpo-search-cost', batchQuestions: 4, miniBatchQuestions: 2, gWithTool: 4 }),
        plugins,
      },
      runDir: join(runDir, runId),
      concurrency: 8,
      threads: 1,
    });
    const events: AkbeEvent[] = [];
    for await (const { event } of store.replay(runId)) events.push(event);
    const started = events.find((e): e is EventOf<'run.started'> => e.type === 'run.started')!;
    t.equal(started.data.algo, 'grpo-search-cost');
    t.same(started.data.config.plugins, plugins, 'run.started records the plugin and its sha256');
    // What a worker or a resumed run reads back (and the recorded plugin passes its sha256 check).
    t.same((await readRunSpec(store, runId)).plugins, plugins);
    const r = auditRunLog(foldRunLog(events));
    t.same(r.mismatches, [], JSON.stringify(r.mismatches.slice(0, 5)));
    t.equal(r.settings.algo, 'grpo-search-cost');
    t.equal(r.checked.steps, 2);
    // The audit recomputes the plugin's rewards: a rollout that searched has reward - 0.1 x calls.
    const searched = events.find(
      (e): e is EventOf<'rollout.completed'> => e.type === 'rollout.completed' && e.data.toolCalls > 0,
    );
    t.ok(searched, 'some rollout searched, so the cost was charged');
  },
);

/**
 * beta-GRPO gates on each call's token span. The audit cannot check a span against its tokens (it
 * has no tokenizer); the re-play with the run's turn decoding derives every span again as the live
 * generate actor does, so a span moved within its own turn onto other tokens diverges.
 */
async function spansRederive(t: Test, events: AkbeEvent[]) {
  const env = worldEnvironment(await readWorldTokenizer(fx.worldDir));
  const turnText = env.turnText;
  const clean = await replayRun(foldRunLog(structuredClone(events)), { turnText });
  t.same(clean.divergences, [], 'every recorded span re-derives from its tokens');
  const forged = structuredClone(events);
  const victim = forged.find(
    (e): e is EventOf<'rollout.completed'> =>
      e.type === 'rollout.completed' && e.data.toolCallSpans.some(([s, e]) => e - s >= 1 && s >= 1),
  );
  if (!victim) return t.fail('no rollout with a call span to forge');
  const spans = victim.data.toolCallSpans;
  const i = spans.findIndex(([s, e]) => e - s >= 1 && s >= 1);
  // One token earlier: still inside the turn (the opening tag), still one span per turn.
  spans[i] = [spans[i][0] - 1, spans[i][1] - 1];
  const r = auditRunLog(foldRunLog(structuredClone(forged)));
  t.same(
    [r.errors, r.mismatches],
    [[], []],
    'the moved span passes validation and the audit (what the re-play closes)',
  );
  const caught = await replayRun(foldRunLog(forged), { turnText });
  t.match(caught.divergences, [
    { what: new RegExp(`rollout ${victim.meta.rolloutId}'s tool-call spans re-derive to`) },
  ]);
  t.equal(caught.divergences.length, 1, 'only the forged rollout diverges');
  const recordedOnly = await replayRun(foldRunLog(structuredClone(forged)));
  t.same(recordedOnly.divergences, [], 'without the tokenizer the re-play reads spans as recorded');
}

t.test('dpo-akbe: 2 tiny steps train against the frozen v0 and audit clean', async (t) => {
  const runId = 'alg-dpo-akbe';
  await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec: tinySpec(fx, { algo: 'dpo-akbe', batchQuestions: 4, miniBatchQuestions: 2, gWithTool: 4 }),
    runDir: join(runDir, runId),
    concurrency: 8,
    threads: 1,
  });
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  const r = auditRunLog(foldRunLog(events));
  t.same(r.mismatches, [], JSON.stringify(r.mismatches.slice(0, 5)));
  t.same(r.settings.defaulted, []);
  t.equal(r.settings.algo, 'dpo-akbe');
  t.equal(r.checked.steps, 2);
  const steps = events.filter((e) => e.type === 'learner.step');
  const pairs = steps.flatMap((e) => e.data.batch?.dpoPairs ?? []);
  t.ok(pairs.length >= 1, `${pairs.length} preference pairs trained`);
  t.ok(
    pairs.every((p) => p.refChosen! < 0 && p.refRejected! < 0),
    'every pair carries its reference logprobs',
  );
  t.notOk(
    steps.some((e) => e.data.batch?.rows.some((x) => x.akbe)),
    'L_DPO replaces L_AKBE: no row has an AKBE weight',
  );
  t.ok(
    steps.some((e) => (e.data.extra['train/dpoLoss'] ?? 0) > 0),
    'the trainer reports L_DPO',
  );
  // Re-training each step against a fresh v0 reference gives the published weights bit for bit.
  await assertVerifies(t, { runId, natsUrl: nats.server.url, home: runDir, steps: 2 });
  // A reference that is not v0 shows: corrupt one recorded reference logprob of step 0.
  const bad = structuredClone(events);
  const step0 = bad.find((e) => e.type === 'learner.step' && e.meta.step === 0);
  const p0 = step0?.type === 'learner.step' ? step0.data.batch?.dpoPairs?.[0] : undefined;
  if (p0) {
    p0.refRejected = p0.refRejected! - 1;
    const audit = auditRunLog(foldRunLog(bad));
    t.ok(
      audit.mismatches.some((m) => m.field === 'batch.dpoPairs[0].refRejected'),
      'a step-0 reference logprob that is not the rollout policy v0 is a mismatch',
    );
  }
});

t.test('offline-akbe: targets built once from the frozen policy, 2 tiny steps audit clean', async (t) => {
  const runId = 'alg-offline-akbe';
  // The frozen policy is the base itself here (a GRPO-trained checkpoint in experiments/paper.yaml).
  const spec = tinySpec(fx, {
    algo: 'offline-akbe',
    frozenPolicy: fx.policyDir,
    batchQuestions: 4,
    miniBatchQuestions: 2,
    gWithTool: 4,
  });
  const lines: string[] = [];
  await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec,
    runDir: join(runDir, runId),
    concurrency: 8,
    threads: 1,
    log: (l) => lines.push(l),
  });
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay(runId)) events.push(event);
  const r = auditRunLog(foldRunLog(events));
  t.same(r.mismatches, [], JSON.stringify(r.mismatches.slice(0, 5)));
  t.same(r.errors, []);
  t.equal(r.settings.algo, 'offline-akbe');
  t.equal(r.checked.steps, 2);
  const assigned = events.filter((e) => e.type === 'question.assigned');
  t.ok(
    assigned.every((e) => e.data.offline !== undefined),
    'every question.assigned carries its offline record',
  );
  const distinct = new Set(assigned.map((e) => e.meta.questionId));
  t.ok(
    lines.some((l) =>
      l.startsWith(`offline-akbe: ${distinct.size} questions rolled out by the frozen policy`),
    ),
    lines.join('\n'),
  );
  const rows = events.flatMap((e) => (e.type === 'learner.step' ? (e.data.batch?.rows ?? []) : []));
  const targets = rows.filter((x) => x.akbe);
  const recorded = assigned.filter((e) => e.data.offline?.target).length;
  t.ok(recorded >= 1, `${recorded} drawn questions have an offline target`);
  t.equal(targets.length, recorded, 'one L_AKBE row per drawn question with an offline target');
  t.ok(
    targets.every((x) => x.rolloutId.startsWith('frozen.') && !x.grpo),
    'the L_AKBE rows are the frozen targets, outside L_GRPO',
  );
  t.notOk(
    rows.some((x) => x.grpo && x.akbe),
    'no on-policy rollout is an AKBE target',
  );
  // A tampered frozen reward is caught at its question.assigned, and so is a changed label.
  const bad = structuredClone(events);
  const q = bad.find((e) => e.type === 'question.assigned' && e.meta.step === 0);
  if (q?.type === 'question.assigned' && q.data.offline) {
    const fr = q.data.offline.rollouts[0];
    fr.reward = 1 - fr.reward;
    const audit = auditRunLog(foldRunLog(bad));
    t.ok(
      audit.mismatches.some((m) => m.field === 'offline.rollouts[0].reward'),
      'a tampered frozen reward is a mismatch',
    );
  }
  const relabelled = structuredClone(events);
  const q0 = relabelled.find((e) => e.type === 'question.assigned' && e.meta.step === 0);
  if (q0?.type === 'question.assigned' && q0.data.offline) {
    q0.data.offline.label.category =
      q0.data.offline.label.category === 'both-wrong' ? 'efficiency' : 'both-wrong';
    t.ok(
      auditRunLog(foldRunLog(relabelled)).mismatches.some((m) => m.field === 'offline.label.category'),
      'a label the frozen rollouts do not give is a mismatch',
    );
  }
  // Built once: a question drawn at both steps must carry the same record at step 1.
  const again = structuredClone(events);
  const ids0 = new Set(assigned.filter((e) => e.meta.step === 0).map((e) => e.meta.questionId));
  const q1 = again.find(
    (e) => e.type === 'question.assigned' && e.meta.step === 1 && ids0.has(e.meta.questionId),
  );
  if (q1?.type === 'question.assigned' && q1.data.offline) {
    q1.data.offline.label.tieBreakSeed += 1;
    t.ok(
      auditRunLog(foldRunLog(again)).mismatches.some((m) => m.field === 'offline (built once)'),
      'a record that changes between steps is a mismatch',
    );
  }
  // A resumed run reads the records back from its log: nothing is rolled out again (the frozen
  // policy named here does not exist, so a roll-out would fail).
  const pool = (await readQuestions(fx.worldDir, 'train')).map((x) => ({ id: x.id }));
  const back = await offlineTargets(
    {
      nc: nats.nc,
      js: jetstream(nats.nc),
      store,
      runId,
      spec: { ...spec, train: { ...spec.train, frozenPolicy: join(runDir, 'no-such-checkpoint') } },
      runDir: join(runDir, runId),
    },
    { machineInput: { runSeed: spec.train.seed, steps: 2, batchQuestions: 4, questions: pool } } as never,
    { env: null as never, tools: [], log: () => undefined },
  );
  const fromLog = Object.fromEntries(
    assigned.map((e) => [e.meta.questionId, (e as EventOf<'question.assigned'>).data.offline]),
  );
  t.same(back, fromLog, 'the records come back from the log, none regenerated');
  // A frozen checkpoint of another vocabulary is refused before anything is rolled out.
  const other = join(runDir, 'other-vocab');
  cpSync(fx.policyDir, other, { recursive: true });
  const cfgFile = join(other, 'config.json');
  writeFileSync(cfgFile, JSON.stringify({ ...JSON.parse(readFileSync(cfgFile, 'utf8')), vocab_size: 7 }));
  await t.rejects(
    offlineTargets(
      {
        nc: nats.nc,
        js: jetstream(nats.nc),
        store,
        runId: 'alg-offline-akbe-fresh',
        spec: { ...spec, train: { ...spec.train, frozenPolicy: other } },
        runDir: join(runDir, 'alg-offline-akbe-fresh'),
      },
      { machineInput: { runSeed: spec.train.seed, steps: 2, batchQuestions: 4, questions: pool } } as never,
      { env: null as never, tools: [], log: () => undefined },
    ),
    { name: 'FrozenPolicyError', message: /has vocab_size 7, the run's base policy .* 604/ },
  );
  // The machines re-play the log (akbe replay --inspect) with the recorded targets.
  const replayed = await replayRun(foldRunLog(events.map((e) => structuredClone(e))));
  t.same(replayed.divergences, [], 'the re-played machines match the log');
  t.equal(replayed.steps, 2);
});
