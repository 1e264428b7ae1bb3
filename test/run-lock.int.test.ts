/**
 * The run lock (src/actors/nats/run-lock.ts) against a real KV bucket: one holder at a time, a live
 * holder refuses with a message naming it, a dead one (its pid gone on this host, or its heartbeat
 * stale) is taken over by exactly one of two contenders, release deletes only our own lock, and a
 * holder whose heartbeat is refused learns it through its signal.
 */
import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import t from 'tap';
import {
  holderState,
  RunLock,
  RunLockedError,
  RunLockLostError,
  type RunLockRecord,
  runLockKey,
} from '../src/actors/nats/run-lock.js';
import { openRunsBucket } from '../src/actors/nats/runs-bucket.js';
import { withNats } from './helpers/nats.js';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const HOUR = 3_600_000; // a heartbeat interval no test waits out

function record(over: Partial<RunLockRecord> & { host: string; pid: number }): RunLockRecord {
  const at = new Date(T0).toISOString();
  return { owner: `${over.host}:${over.pid}`, startedAt: at, heartbeatAt: at, heartbeatMs: HOUR, ...over };
}

/** A child process that is running (`alive`) until `exit()` returns. */
function child(): { pid: number; exit: () => Promise<void> } {
  const c = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  const exited = new Promise<void>((r) => c.once('exit', () => r()));
  t.teardown(() => c.kill('SIGKILL'));
  return {
    pid: c.pid!,
    exit: async () => {
      c.kill('SIGKILL');
      await exited;
    },
  };
}

async function until(ok: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

t.test('holderState: stale past 3 intervals, dead when its pid is gone on this host', async (t) => {
  const held = record({ host: 'a', pid: 42, heartbeatMs: 1000 });
  const at = (now: number, host: string, alive: boolean) =>
    holderState(held, { now, host, pidAlive: () => alive });
  t.same(at(T0 + 3000, 'b', true), { alive: true }, 'exactly 3 intervals old: still alive');
  t.same(at(T0 + 3001, 'b', true), { alive: false, why: 'its last heartbeat was 3.0 s ago, over 3.0 s' });
  t.same(at(T0 + 10, 'a', false), { alive: false, why: 'pid 42 no longer exists on a' });
  t.same(at(T0 + 10, 'b', false), { alive: true }, "another host's pid is not probed");
});

t.test('a run lock against a real KV', async (t) => {
  const nats = await withNats(t);
  const kv = await openRunsBucket(nats.nc);
  const read = async (runId: string) => {
    const e = await kv.get(runLockKey(runId));
    return e?.operation === 'PUT' ? (JSON.parse(e.string()) as RunLockRecord) : null;
  };
  const put = (runId: string, r: RunLockRecord) => kv.put(runLockKey(runId), JSON.stringify(r));
  const fixed = { now: () => T0, heartbeatMs: HOUR };

  t.test('acquire writes the holder; a second acquire is refused naming it', async (t) => {
    const lock = await RunLock.acquire(nats.nc, 'r1', { ...fixed, host: 'hostA', pid: process.pid });
    t.teardown(() => lock.release());
    const at = new Date(T0).toISOString();
    t.same(await read('r1'), {
      owner: `hostA:${process.pid}`,
      host: 'hostA',
      pid: process.pid,
      startedAt: at,
      heartbeatAt: at,
      heartbeatMs: HOUR,
    });
    const second = RunLock.acquire(nats.nc, 'r1', { now: () => T0 + 1234, host: 'hostA', pid: 7 });
    await t.rejects(second, {
      name: 'RunLockedError',
      message: `run r1 is already being run by the orchestrator hostA:${process.pid} (last heartbeat 1.2 s ago); wait for it to finish, or stop that process (pid ${process.pid} on hostA) and start again`,
    });
    const err = await second.catch((e) => e);
    t.ok(err instanceof RunLockedError);
    t.equal(err.heartbeatAgeMs, 1234);
    t.equal(err.holder.pid, process.pid);
    t.equal((await read('r1'))?.owner, `hostA:${process.pid}`, 'the refused acquire changed nothing');
  });

  t.test('a holder on this host is refused while its pid lives, taken over once it is gone', async (t) => {
    const host = hostname();
    const holder = child();
    // A fresh heartbeat: only the pid tells whether the holder is alive.
    await put('r2', record({ host, pid: holder.pid, heartbeatAt: new Date().toISOString() }));
    await t.rejects(RunLock.acquire(nats.nc, 'r2', { heartbeatMs: HOUR }), { name: 'RunLockedError' });
    await holder.exit();
    const lines: string[] = [];
    const lock = await RunLock.acquire(nats.nc, 'r2', { heartbeatMs: HOUR, log: (l) => lines.push(l) });
    t.teardown(() => lock.release());
    t.equal((await read('r2'))?.owner, `${host}:${process.pid}`);
    t.same(lines, [
      `run lock: taking run r2 over from ${host}:${holder.pid}: pid ${holder.pid} no longer exists on ${host}`,
    ]);
  });

  t.test('a holder on another host is taken over once its heartbeat is 3 intervals old', async (t) => {
    await put('r3', record({ host: 'elsewhere', pid: 1, heartbeatMs: 1000 }));
    const at = (now: number) => ({ now: () => now, heartbeatMs: HOUR, host: 'here', pid: 9 });
    await t.rejects(RunLock.acquire(nats.nc, 'r3', at(T0 + 3000)), {
      name: 'RunLockedError',
      message: /elsewhere:1 \(last heartbeat 3\.0 s ago\)/,
    });
    const lock = await RunLock.acquire(nats.nc, 'r3', at(T0 + 3001));
    t.teardown(() => lock.release());
    t.equal((await read('r3'))?.owner, 'here:9');
  });

  t.test('two orchestrators taking over one dead lock at once: exactly one wins', async (t) => {
    // Five rounds: the two interleave differently (both read the dead lock, or one reads the
    // other's fresh one); both contenders are alive, so either way the loser is refused.
    for (let round = 0; round < 5; round++) {
      const runId = `r4-${round}`;
      await put(runId, record({ host: 'elsewhere', pid: 1, heartbeatMs: 1000 }));
      const contender = (pid: number) =>
        RunLock.acquire(nats.nc, runId, {
          now: () => T0 + 60_000,
          heartbeatMs: HOUR,
          host: 'here',
          pid,
          pidAlive: () => true,
        });
      const results = await Promise.allSettled([contender(11), contender(12)]);
      const won = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
      const lost = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
      for (const w of won) t.teardown(() => w.release());
      t.equal(won.length, 1, `${runId}: one took it over`);
      t.equal(lost.length, 1, `${runId}: the other was refused`);
      t.ok(lost[0] instanceof RunLockedError);
      t.equal(lost[0]?.holder?.owner, won[0]?.holder.owner, 'refused naming the winner');
      t.equal((await read(runId))?.owner, won[0]?.holder.owner);
    }
  });

  t.test('release deletes the lock only while it is ours', async (t) => {
    const mine = await RunLock.acquire(nats.nc, 'r5', fixed);
    t.equal(await mine.release(), true);
    t.equal(await read('r5'), null, 'the key is gone');
    t.equal(await mine.release(), false, 'twice is a no-op');
    const again = await RunLock.acquire(nats.nc, 'r5', fixed);
    t.equal((await read('r5'))?.pid, process.pid, 'a released lock is free to acquire');
    await again.release();

    const lines: string[] = [];
    const taken = await RunLock.acquire(nats.nc, 'r6', { ...fixed, log: (l) => lines.push(l) });
    const other = record({ host: 'elsewhere', pid: 5 });
    await put('r6', other); // someone else holds it now
    t.equal(await taken.release(), false);
    t.same(await read('r6'), other, "the other holder's lock stays");
    t.same(lines, ["run lock: not released: run r6's lock is no longer ours"]);
  });

  t.test("a heartbeat refused (the lock was taken over) aborts the holder's signal", async (t) => {
    const lines: string[] = [];
    const lock = await RunLock.acquire(nats.nc, 'r7', { heartbeatMs: 30, log: (l) => lines.push(l) });
    const first = (await read('r7'))!.heartbeatAt;
    await until(() => false, 120); // a few heartbeats
    const beat = (await read('r7'))!;
    t.ok(beat.heartbeatAt > first, `heartbeats rewrite heartbeatAt (${first} -> ${beat.heartbeatAt})`);
    t.equal(beat.startedAt, first, 'startedAt stays');
    t.notOk(lock.signal.aborted);

    const thief = record({ host: 'elsewhere', pid: 77 });
    await put('r7', thief);
    await until(() => lock.signal.aborted, 2_000);
    t.ok(lock.signal.aborted, 'the signal aborted');
    const reason = lock.signal.reason;
    t.ok(reason instanceof RunLockLostError);
    t.equal(
      reason.message,
      "run r7: this orchestrator lost the run's lock to the orchestrator elsewhere:77; stopped without writing more to the run's log",
    );
    t.same(lines, [`run lock: LOST: ${reason.message}`]);
    t.equal(await lock.release(), false, 'a lost lock is not released');
    t.same(await read('r7'), thief, "the thief's lock stays");
  });
});

t.test('a closed connection ends the heartbeat without a word (the run says why it ended)', async (t) => {
  const nats = await withNats(t);
  const nc = await nats.connectAs('orchestrator');
  const lines: string[] = [];
  const lock = await RunLock.acquire(nc, 'r-closed', { heartbeatMs: 20, log: (l) => lines.push(l) });
  await new Promise((r) => setTimeout(r, 100)); // a few heartbeats land
  t.same(lines, [], 'heartbeats while connected say nothing');
  await nc.close();
  await new Promise((r) => setTimeout(r, 200)); // ~10 intervals on the closed connection
  t.same(lines, [], 'no "heartbeat failed; retrying" after the connection closed');
  t.notOk(lock.signal.aborted, 'a closed connection is not a lost lock');
});
