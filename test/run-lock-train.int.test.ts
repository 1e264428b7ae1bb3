/**
 * The run lock around runTraining (src/actors/nats/run-lock.ts, orchestrator.ts): a second orchestrator
 * started on a run in progress is refused before it touches the run, and the first finishes and
 * audits clean; an orchestrator whose lock is taken over stops writing (no run.finished), one that
 * fails to start releases the lock; the CLI says the refusal in one line (`akbe train` exits 1,
 * `akbe experiment run` reports each refused run as failed and goes on).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { type RunLockRecord, runLockKey } from '../src/actors/nats/run-lock.js';
import { openRunsBucket } from '../src/actors/nats/runs-bucket.js';
import { RunLockedError, RunLockLostError, runTraining } from '../src/actors/orchestrator/orchestrator.js';
import type { TrainingOptions } from '../src/actors/orchestrator/training-options.js';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { processClock } from '../src/events/clock.js';
import { EventStore } from '../src/events/store.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';
import { TINY_TRAIN, tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const HOST = escapeRe(hostname());

/** A lock as a live orchestrator (this test process, on this host) holds it. */
function liveHolder(pid = process.pid): RunLockRecord {
  const at = new Date().toISOString();
  const host = hostname();
  return { owner: `${host}:${pid}`, host, pid, startedAt: at, heartbeatAt: at, heartbeatMs: 3_600_000 };
}

t.test('the run lock around runTraining and in the CLI', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const kv = await openRunsBucket(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-run-lock-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const events = async (runId: string) => {
    const out: AkbeEvent[] = [];
    for await (const { event } of store.replay(runId)) out.push(event);
    return out;
  };
  const lockOf = async (runId: string) => {
    const e = await kv.get(runLockKey(runId));
    return e?.operation === 'PUT' ? (JSON.parse(e.string()) as RunLockRecord) : null;
  };
  const options = (runId: string, over: Partial<TrainingOptions> = {}): TrainingOptions => ({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec: tinySpec(fx),
    runDir: join(home, 'runs', runId),
    concurrency: 8,
    threads: 1,
    ...over,
  });

  t.test('a second orchestrator on a run in progress is refused; the first finishes clean', async (t) => {
    const runId = 'lock-second';
    let second: Promise<unknown> | null = null;
    const secondLines: string[] = [];
    const result = await runTraining(
      options(runId, {
        // Mid-run (step 0 learned, step 1 to come), a resume of the same run is started...
        onStep: (r) => {
          if (r.step === 0)
            second = runTraining(options(runId, { resume: true, log: (l) => secondLines.push(l) })).catch(
              (err) => err,
            );
        },
        // ... and the first run does not end (nor release its lock) before that attempt settled.
        afterRun: async () => {
          await second;
        },
      }),
    );
    t.equal(result.steps, TINY_TRAIN.steps);
    const err = (await second) as unknown as RunLockedError;
    t.ok(err instanceof RunLockedError, `refused: ${(err as Error)?.message}`);
    t.equal(err.holder.owner, `${hostname()}:${process.pid}`);
    t.match(
      err.message,
      new RegExp(
        `^run lock-second is already being run by the orchestrator ${HOST}:${process.pid} \\(last heartbeat \\d+\\.\\d s ago\\); wait for it to finish, or stop that process`,
      ),
    );
    t.same(secondLines, [], 'the refused orchestrator did nothing to log');
    const all = await events(runId);
    const count = (type: AkbeEvent['type']) => all.filter((e) => e.type === type).length;
    t.equal(count('run.started'), 1);
    t.equal(count('learner.step'), TINY_TRAIN.steps);
    t.equal(all.find((e) => e.type === 'run.finished')?.data.status, 'completed');
    const audit = auditRun(all);
    t.same(audit.mismatches, [], JSON.stringify(audit.mismatches.slice(0, 3)));
    t.equal(audit.checked.steps, TINY_TRAIN.steps);
    t.equal(await lockOf(runId), null, 'the lock is released when the run completes');
  });

  t.test('an orchestrator whose lock is taken over stops without writing its end', async (t) => {
    const runId = 'lock-lost';
    const thief = liveHolder(1);
    const lines: string[] = [];
    let lostAt = Number.POSITIVE_INFINITY; // on the events' clock
    const run = runTraining(
      options(runId, {
        lockHeartbeatMs: 30,
        log: (l) => {
          if (l.startsWith('run lock: LOST')) lostAt = processClock.now();
          lines.push(l);
        },
        onStep: (r) => {
          if (r.step === 0) void kv.put(runLockKey(runId), JSON.stringify(thief));
        },
        // Reached only when the last step beat the next heartbeat: wait for that heartbeat.
        afterRun: async () => {
          while (!lines.some((l) => l.startsWith('run lock: LOST')))
            await new Promise((r) => setTimeout(r, 10));
        },
      }),
    );
    await t.rejects(run, {
      name: 'RunLockLostError',
      message: `run ${runId}: this orchestrator lost the run's lock to the orchestrator ${thief.owner}; stopped without writing more to the run's log`,
    });
    t.ok((await run.catch((e) => e)) instanceof RunLockLostError);
    t.ok(
      lines.includes(
        `run lock: LOST: run ${runId}: this orchestrator lost the run's lock to the orchestrator ${thief.owner}; stopped without writing more to the run's log`,
      ),
    );
    const all = await events(runId);
    t.equal(all.filter((e) => e.type === 'run.finished').length, 0, 'no run.finished from the loser');
    // The rollout workers (roles in this process) store what they finish until they are stopped;
    // the orchestrator's own facts stop at the loss.
    const late = all.filter((e) => !/^(rollout\.|tool\.)/.test(e.type) && e.meta.at > lostAt);
    t.same(
      late.map((e) => `${e.type}@${e.meta.step}`),
      [],
      `no orchestrator event made after the loss (step 0 learned: ${all.some((e) => e.type === 'learner.step')})`,
    );
    t.equal((await kv.get(`${runId}.status`))?.string(), 'running', "the loser left the run's status alone");
    t.same(await lockOf(runId), thief, "the new holder's lock stays");
  });

  t.test('a run that fails to start releases its lock', async (t) => {
    await t.rejects(runTraining(options('lock-resume-nothing', { resume: true })), {
      name: 'ResumeError',
      message: 'run lock-resume-nothing: has no run.started event to resume from',
    });
    const e = await kv.get(runLockKey('lock-resume-nothing'));
    t.equal(e?.operation, 'DEL', 'taken, then deleted');
  });

  t.test('akbe train and akbe experiment run say a refusal in one line', async (t) => {
    const holder = liveHolder();
    const refusal = (runId: string) =>
      `run ${runId} is already being run by the orchestrator ${HOST}:${holder.pid} \\(last heartbeat \\d+\\.\\d s ago\\); wait for it to finish, or stop that process \\(pid ${holder.pid} on ${HOST}\\) and start again`;
    const config = join(home, 'tiny.json');
    writeFileSync(
      config,
      JSON.stringify({ ...TINY_TRAIN, world: fx.worldDir, policy: fx.policyDir, evalQuestions: 0 }),
    );
    await kv.put(runLockKey('lock-cli'), JSON.stringify(holder));
    const flags = ['--nats', nats.server.url, '--home', home];
    const train = await runCli('train', '--config', config, '--run-id', 'lock-cli', ...flags);
    t.equal(train.code, 1);
    t.match(train.err, new RegExp(`\\nakbe train: ${refusal('lock-cli')}\\n$`), train.err);
    t.same(await events('lock-cli'), [], 'nothing written to the refused run');

    const spec = join(home, 'lk.json');
    writeFileSync(
      spec,
      JSON.stringify({
        name: 'lk',
        world: fx.worldDir,
        policy: fx.policyDir,
        steps: 1,
        config: {
          batchQuestions: 2,
          miniBatchQuestions: 1,
          gWithTool: 2,
          gNoTool: 2,
          maxToolCalls: 2,
          maxResponseTokens: 40,
          lr: 0.001,
          evalQuestions: 0,
        },
        seeds: [1],
        grid: [{ algo: 'grpo' }, { algo: 'akbe' }],
      }),
    );
    for (const id of ['lk-grpo-s1', 'lk-akbe-s1']) await kv.put(runLockKey(id), JSON.stringify(holder));
    const grid = await runCli('experiment', 'run', '--spec', spec, ...flags);
    t.equal(grid.code, 1, grid.err);
    for (const id of ['lk-grpo-s1', 'lk-akbe-s1'])
      t.match(grid.err, new RegExp(`experiment: run ${id} failed: ${refusal(id)} \\(log `), `${id} reported`);
    t.match(grid.err, /experiment lk: 0 of 2 runs completed/);
  });
});
