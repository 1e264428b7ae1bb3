/**
 * The audit and the inspector re-play against a REAL training run: the tiny world and policy train
 * 2 steps through a real nats-server with the orchestrator (issue 6's loop), and the resulting log
 * replays clean and re-plays through the machines without a divergence.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { WebSocket } from 'ws';
import { startInspector } from '../src/actors/inspect/inspect.js';
import { replayRun } from '../src/actors/inspect/inspect-replay.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { trainerRuntimeOf } from '../src/actors/orchestrator/run-start.js';
import { auditRunLog } from '../src/audit/audit.js';
import { foldRunLog } from '../src/audit/run-log.js';
import { fillSegments } from '../src/audit/segments.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { manifestDigest } from '../src/events/train-digest.js';
import { readWorldTokenizer } from '../src/world/files.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';
import { assertVerifies } from './helpers/verify.js';

delete process.env.NATS_URL;
process.env.CI = 'true';

const fx = await tinyRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const runDir = mkdtempSync(join(tmpdir(), 'akbe-audit-train-'));
t.teardown(() => rmSync(runDir, { recursive: true, force: true }));
// The live inspector is attached to the real run, with a plain WebSocket viewer on the relay.
const insp = await startInspector({ port: 0 });
const viewer = new WebSocket(insp.wsUrl);
const seen: Array<{ type: string; sessionId: string; definition?: string }> = [];
viewer.on('message', (d) => seen.push(JSON.parse(String(d))));
await new Promise((r) => viewer.once('open', r));
const viewerClosed = new Promise((r) => viewer.once('close', r));
await runTraining({
  nc: nats.nc,
  js: jetstream(nats.nc),
  store,
  runId: 'real',
  spec: tinySpec(fx),
  runDir,
  concurrency: 8,
  threads: 1,
  inspect: insp.inspect,
});
await insp.close();
await viewerClosed;
const events: AkbeEvent[] = [];
for await (const { event } of store.replay('real')) events.push(event);
// The log as read is shared by every subtest: each takes its own copy (fillSegments writes into
// the events it is given, and would hide a sink that stopped recording turn texts).
const fresh = (): AkbeEvent[] => structuredClone(events);

t.test(
  "live: the inspector relay carried the real run's run, question, rollout and learner machines",
  async (t) => {
    const kind = new Map<string, string>();
    for (const m of seen)
      if (m.type === '@xstate.actor' && m.definition) kind.set(m.sessionId, JSON.parse(m.definition).id);
    const count = (id: string) => [...kind.values()].filter((k) => k === id).length;
    t.equal(count('run'), 1);
    t.equal(count('learner'), 1);
    t.equal(count('question'), 2 * 2, 'B questions x 2 steps');
    t.equal(count('rollout'), 2 * 2 * 4, 'x (G_wt + G_nt), run by the rollout worker role');
    for (const id of ['run', 'question', 'rollout', 'learner'])
      t.ok(
        seen.some((m) => m.type === '@xstate.snapshot' && kind.get(m.sessionId) === id),
        `${id} snapshots`,
      );
  },
);

t.test("run.started records the trainer's runtime: ORT version, provider, threads, optimizer", async (t) => {
  const started = events.find((e) => e.type === 'run.started');
  if (started?.type !== 'run.started') throw new Error('no run.started');
  t.equal(started.v, 2);
  const ort = JSON.parse(readFileSync('node_modules/onnxruntime-node/package.json', 'utf8')).version;
  t.same(started.data.trainerRuntime, {
    ortVersion: ort,
    executionProvider: 'cpu',
    intraOpThreads: 1,
    hostCpus: (await import('node:os')).availableParallelism(),
    optimizer: 'host',
    dtype: 'float32',
    batchInvariantDecode: true,
  });
  // An orchestrator whose trainer runs in another process cannot see its runtime: none recorded.
  t.equal(trainerRuntimeOf({ spec: tinySpec(fx), roles: ['search', 'policy', 'rollout'] }), null);
});

t.test('a real training run audits clean', async (t) => {
  const log = foldRunLog(fresh());
  const tok = await readWorldTokenizer(fx.worldDir);
  t.equal(
    fillSegments(log, (ids) => tok.decode(ids)),
    0,
    'the sink recorded every turn text',
  );
  const r = auditRunLog(log);
  t.same(r.mismatches, [], JSON.stringify(r.mismatches.slice(0, 5)));
  t.same(r.settings.defaulted, [], 'every setting read from run.started');
  t.equal(r.checked.steps, 2);
  t.equal(r.checked.labels, 4);
  t.equal(r.checked.rollouts, 16);
  t.comment(r.notes.join('\n'));
  t.notOk(
    r.notes.some((n) => /not rebuilt|request digests/.test(n)),
    `every step's train request rebuilt from the log and digested: ${r.notes.join(' | ')}`,
  );
  // Every policy.published records the manifest of its checkpoint's files, and the files on disk
  // (the run dir's checkpoints) have its digest.
  const published = events.filter((e) => e.type === 'policy.published');
  t.ok(published.length >= 2);
  for (const e of published) {
    if (e.type !== 'policy.published') continue;
    t.ok(e.data.manifest, `v${e.data.version}: manifest recorded`);
    t.ok(
      ['config.json', 'model.safetensors'].every((f) => f in (e.data.manifest ?? {})),
      `v${e.data.version}: config and weights in it: ${Object.keys(e.data.manifest ?? {})}`,
    );
    t.equal(e.data.manifestSha256, manifestDigest(e.data.manifest ?? {}));
  }
  const withFiles = auditRunLog(log, { checkpointsDir: join(runDir, 'checkpoints') });
  t.same(withFiles.mismatches, [], 'the checkpoint files on disk match their recorded manifests');
  t.notOk(
    withFiles.notes.some((n) => /manifest/.test(n)),
    `no manifest note: ${withFiles.notes.join(' | ')}`,
  );
});

t.test(
  'a request the log does not rebuild is caught even when learner and trainer agree on its digest',
  async (t) => {
    // An orchestrator that sent (and a trainer that trained on) a batch other than the logged
    // rollouts give: both record the same digest, so only the rebuilt request tells.
    const evs = fresh();
    const forged = 'f'.repeat(64);
    for (const e of evs)
      if (
        (e.type === 'learner.step' && e.meta.step === 1) ||
        (e.type === 'policy.published' && e.data.version === 2)
      )
        e.data.requestSha256 = forged;
    const r = auditRunLog(foldRunLog(evs));
    const hits = r.mismatches.filter((m) => m.field === 'requestSha256 (rebuilt from the log)');
    t.equal(hits.length, 1, JSON.stringify(r.mismatches));
    t.equal(hits[0]?.step, 1, 'at the forged step');
    t.equal(hits[0]?.recorded, forged);
  },
);

t.test('the sink records what the audit needs: advantages and trained rows are checked', async (t) => {
  const learner = events.filter((e) => e.type === 'learner.step');
  t.equal(learner.length, 2);
  let rows = 0;
  for (const e of learner) {
    const b = e.data.batch;
    t.ok(b, `step ${e.meta.step}: learner.step.batch recorded`);
    if (!b) continue;
    rows += b.rows.length;
    t.equal(b.rows.length, e.data.extra.batchRows, 'one recorded row per trained row');
    t.equal(b.miniBatchSeed, e.meta.seed, 'the mini-batch seed');
    t.ok(
      b.rows.some((row) => row.grpo),
      'GRPO rows recorded',
    );
    t.ok(
      b.rows.every((row) => row.miniBatch >= 0),
      'every row is in a mini-batch',
    );
  }
  const completed = events.filter((e) => e.type === 'rollout.completed');
  t.equal(completed.length, 16);
  t.ok(
    completed.every((e) => (e.data.segments?.length ?? 0) > 0),
    'every rollout.completed carries its turn texts',
  );
  // Without decoding anything: the log alone is enough for the whole audit.
  const r = auditRunLog(foldRunLog(fresh()));
  t.same(r.mismatches, [], JSON.stringify(r.mismatches.slice(0, 5)));
  t.equal(r.checked.rows, rows, 'every trained row re-derived and compared');
  t.ok(rows > 0);
  t.notOk(
    r.notes.some((n) => /not checked|not recorded/.test(n)),
    `no "not recorded, not checked" note: ${r.notes.join(' | ')}`,
  );
});

t.test('a recorded advantage that differs from the recomputed one is reported', async (t) => {
  // The tiny policy's groups often share one reward (all advantages 0), so tamper with a copy.
  const copy = fresh();
  const e = copy.find((x) => x.type === 'learner.step' && x.data.batch?.rows.some((row) => row.grpo));
  if (e?.type !== 'learner.step' || !e.data.batch) throw new Error('no learner.step with GRPO rows');
  const i = e.data.batch.rows.findIndex((row) => row.grpo);
  e.data.batch.rows[i].advantage += 0.5;
  const r = auditRunLog(foldRunLog(copy));
  t.same(
    r.mismatches.map((m) => [m.seq, m.field]),
    [[e.meta.seq, `batch.rows[${i}].advantage`]],
    JSON.stringify(r.mismatches),
  );
});

t.test('and re-plays through the machines exactly (the inspector re-play)', async (t) => {
  const log = foldRunLog(fresh());
  const tok = await readWorldTokenizer(fx.worldDir);
  t.equal(
    fillSegments(log, (ids) => tok.decode(ids)),
    0,
    'the sink recorded every turn text',
  );
  const r = await replayRun(log);
  t.same(r.divergences, []);
  t.equal(r.steps, 2);
});

t.test('akbe replay --verify-training re-derives both published checkpoints from v0', async (t) => {
  await assertVerifies(t, { runId: 'real', natsUrl: nats.server.url, home: runDir, steps: 2 });
});

t.test('akbe replay --run on it exits 0', async (t) => {
  const r = await runCli(
    'replay',
    '--run',
    'real',
    '--inspect',
    '--inspect-port',
    '0',
    '--nats',
    nats.server.url,
  );
  t.equal(r.code, 0, r.out);
  t.match(r.out, /replay of run real: clean/);
});
