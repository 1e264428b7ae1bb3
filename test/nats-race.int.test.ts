/**
 * Issue 21 item 6: short-lived commands never start a server that a run could adopt, and a
 * starting run never adopts one that does not stay (src/actors/nats/server-choice.ts).
 * The race: `akbe events export` run again and again on a home while `akbe train` starts there;
 * before the fix the first export started an embedded server, the run joined it and died when
 * that export exited ("cannot connect to NATS at ... (running)").
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { connectAkbeNats, isNatsServerAlive, readServerRecord } from '../src/actors/nats/connection.js';
import { serverRecordPath } from '../src/actors/nats/server-record.js';
import { EventStore } from '../src/events/store.js';
import { runCli } from './helpers/cli.js';
import { startCli, startScript, until } from './helpers/cli-process.js';
import { TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

delete process.env.NATS_URL;

function tempHome(t: Test): string {
  const home = mkdtempSync(join(tmpdir(), 'akbe-race-'));
  t.teardown(() => {
    const rec = readServerRecord(home);
    if (rec && isNatsServerAlive(rec.pid)) process.kill(rec.pid, 'SIGKILL');
    rmSync(home, { recursive: true, force: true });
  });
  return home;
}

const NO_SERVER =
  /^akbe events export: no NATS server runs for .+: start one with akbe nats up, or pass --nats URL or set NATS_URL\n$/;

t.test('no server running: a short command says so in one line, exits 1, starts none', async (t) => {
  const home = tempHome(t);
  const r = await runCli('events', 'export', '--run', 'x', '--home', home);
  t.equal(r.code, 1);
  t.match(r.err, NO_SERVER);
  t.equal(r.out, '');
  t.notOk(existsSync(serverRecordPath(home)), 'no server was started or recorded');
  const runs = await runCli('runs', '--home', home);
  t.equal(runs.code, 1);
  t.match(runs.err, /^akbe runs: no NATS server runs for /);
});

t.test("a run refuses another process's embedded server; a short command attaches to it", async (t) => {
  const home = tempHome(t);
  const owner = startScript('test/helpers/embedded-owner.ts', [], { AKBE_HOME: home });
  t.teardown(() => owner.child.kill('SIGKILL'));
  await until('the owner', () => /owning/.test(owner.output()), 60_000);
  const record = readServerRecord(home)!;
  await t.rejects(connectAkbeNats({ home, env: {}, embedded: true }), {
    name: 'NatsServerNotSharedError',
    message: new RegExp(`embedded server of akbe process ${owner.child.pid}, which stops it when it exits`),
  });
  const viewer = await connectAkbeNats({ home, env: {} });
  t.equal(viewer.url, record.url);
  t.equal(viewer.source, 'running');
  await viewer.close();
});

t.test('two runs starting at once on an empty home take turns: one server, not two', async (t) => {
  const home = tempHome(t);
  // In one process both may use the server (it is theirs); across processes the second is refused.
  const both = await Promise.all([
    connectAkbeNats({ home, env: {}, embedded: true }),
    connectAkbeNats({ home, env: {}, embedded: true }),
  ]);
  t.teardown(async () => {
    for (const n of both.reverse()) await n.close();
  });
  t.same(both.map((n) => n.source).sort(), ['embedded', 'running']);
  t.equal(both[0].url, both[1].url);
});

t.test('a short command run while a run starts: the run finishes', async (t) => {
  const fx = await tinyRunFixture();
  const home = tempHome(t);
  const config = join(home, 'tiny.json');
  const job = { ...TINY_TRAIN, steps: 1, world: fx.worldDir, policy: fx.policyDir, evalQuestions: 0 };
  writeFileSync(config, JSON.stringify(job));
  // A follower started first: it must not hold a server of its own that the run could join
  // (before the fix it did, and its exit below took the run's server with it).
  const tail = startCli(['events', 'tail', '--run', 'race1', '--home', home], { AKBE_HOME: home });
  t.teardown(() => tail.child.kill('SIGKILL'));
  await until(
    'the tail to connect or give up',
    () => /NATS|exported|no NATS/.test(tail.output()) || existsSync(serverRecordPath(home)),
    60_000,
  );
  const train = startCli(['train', '--config', config, '--run-id', 'race1', '--home', home], {
    AKBE_HOME: home,
  });
  t.teardown(() => train.child.kill('SIGKILL'));
  let trainCode: number | null | undefined;
  void train.exited.then((c) => (trainCode = c));
  const outcomes = { attached: 0, none: 0 };
  const other: string[] = [];
  // Exports from this process, from before the run connects until it is done: each attaches
  // (exporting what the log holds so far, or saying it holds nothing yet) or finds no server.
  while (trainCode === undefined) {
    const r = await runCli('events', 'export', '--run', 'race1', '--home', home);
    if (r.code === 0 || /run race1 has no events on nats:/.test(r.err)) outcomes.attached++;
    else if (NO_SERVER.test(r.err)) outcomes.none++;
    // Found the run's server as it stopped, after the run's last line.
    else if (/run race1 1 steps/.test(train.output()) && /cannot connect to NATS/.test(r.err))
      outcomes.none++;
    else other.push(r.err);
    // The short follower ends while the run trains (Ctrl-C), if it is still there.
    if (/NATS at/.test(train.output()) && tail.child.exitCode === null) tail.child.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(await tail.exited, 1, 'the follower found no server');
  t.match(tail.output(), /^akbe events tail: no NATS server runs for /);
  t.equal(trainCode, 0, train.output().slice(-600));
  t.same(other, [], 'no other outcome');
  t.ok(outcomes.none > 0, `exports ran before the run's server was up (${JSON.stringify(outcomes)})`);
  // The run's server went with it; read its log from a fresh one over the same store.
  const nats = await connectAkbeNats({ home, env: {}, embedded: true });
  t.teardown(() => nats.close());
  const store = await EventStore.open(nats.nc);
  const finished = [];
  for await (const { event } of store.replayType('race1', 'run.finished')) finished.push(event.data.status);
  t.same(finished, ['completed']);
});
