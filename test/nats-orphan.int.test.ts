/**
 * Issue 11 item 6 (NATS side): akbe's embedded nats-server does not outlive a SIGKILLed akbe, and
 * `akbe nats down` stops a server whose owning akbe is gone (an orphan) instead of refusing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { isNatsServerAlive, readServerRecord, writeServerRecord } from '../src/actors/nats/connection.js';
import { startNatsServer } from '../src/actors/nats/nats-server.js';
import { runCli } from './helpers/cli.js';
import { startScript, until } from './helpers/cli-process.js';

delete process.env.NATS_URL;

function tempHome(t: Test): string {
  const home = mkdtempSync(join(tmpdir(), 'akbe-orphan-'));
  t.teardown(() => {
    const rec = readServerRecord(home);
    if (rec && isNatsServerAlive(rec.pid)) process.kill(rec.pid, 'SIGKILL');
    rmSync(home, { recursive: true, force: true });
  });
  return home;
}

t.test('the embedded server stops within seconds of a SIGKILL of its akbe', async (t) => {
  const home = tempHome(t);
  // A process that owns an embedded server as a run does (short commands start none).
  const owner = startScript('test/helpers/embedded-owner.ts', [], { AKBE_HOME: home });
  t.teardown(() => owner.child.kill('SIGKILL'));
  await until('the embedded server', () => readServerRecord(home)?.mode === 'embedded', 60_000);
  const record = readServerRecord(home)!;
  t.equal(record.ownerPid, owner.child.pid, 'the owner owns it');
  t.ok(isNatsServerAlive(record.pid));
  owner.child.kill('SIGKILL');
  await owner.exited;
  const killedAt = Date.now();
  await until('the server to stop', () => !isNatsServerAlive(record.pid), 10_000);
  const waited = Date.now() - killedAt;
  t.ok(waited < 8_000, `stopped ${waited} ms after its owner died`);
  t.match((await runCli('nats', 'down', '--home', home)).out, /not running/, 'a stale record is cleared');
});

t.test('nats down stops an orphaned embedded server instead of refusing', async (t) => {
  const home = tempHome(t);
  // An owner that is certainly dead, and a server that does not watch it (an older akbe's).
  const dead = spawnSync('true').pid;
  const server = await startNatsServer({ storeDir: join(home, 'nats'), watchParent: false });
  t.teardown(() => server.kill());
  writeServerRecord(home, {
    pid: server.pid,
    port: server.port,
    url: server.url,
    storeDir: server.storeDir,
    mode: 'embedded',
    ownerPid: dead,
    startedAt: new Date().toISOString(),
  });
  const down = await runCli('nats', 'down', '--home', home);
  t.equal(down.code, 0, down.err);
  t.match(down.out, new RegExp(`stopped pid ${server.pid} \\(orphaned by akbe process ${dead}\\)`));
  t.notOk(isNatsServerAlive(server.pid), 'the orphan is gone');
});

t.test('nats down still refuses a server whose akbe is alive', async (t) => {
  const home = tempHome(t);
  const server = await startNatsServer({ storeDir: join(home, 'nats') });
  t.teardown(() => server.stop());
  writeServerRecord(home, {
    pid: server.pid,
    port: server.port,
    url: server.url,
    storeDir: server.storeDir,
    mode: 'embedded',
    ownerPid: process.pid,
    startedAt: new Date().toISOString(),
  });
  const down = await runCli('nats', 'down', '--home', home);
  t.equal(down.code, 1);
  t.match(down.err, new RegExp(`belongs to akbe process ${process.pid}`));
  t.ok(isNatsServerAlive(server.pid));
});
