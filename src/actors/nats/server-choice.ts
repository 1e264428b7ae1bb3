/**
 * Which recorded server a process may use, and who may start one (issue 21 item 6).
 *
 * Only a run (`akbe train`, `akbe demo`, `akbe experiment run`) starts an embedded server; every
 * other command attaches to a running one or fails in one line (NoNatsServerError). A short
 * command that started a server would take it down when it exits, under any run that had joined
 * it in the meantime. A run joins only a server that stays: one started by `akbe nats up`
 * (mode detached) or its own; another process's embedded server stops with that process, and a
 * second server on the same store dir would corrupt it (nats-server 2.9 does not lock its store),
 * so such a run is refused (NatsServerNotSharedError). Two runs starting at once on an empty home
 * are serialized by a claim file, so that only one starts the server.
 */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { natsDir, type ServerRecord, serverRecordPath } from './server-record.js';

/** No server runs for this home and this command does not start one. */
export class NoNatsServerError extends Error {
  constructor(readonly home: string) {
    super(
      `no NATS server runs for ${home} (no live ${serverRecordPath(home)}): start one with akbe nats up, or pass --nats URL or set NATS_URL`,
    );
    this.name = 'NoNatsServerError';
  }
}

/** The recorded server is another process's embedded one: a run must not depend on it. */
export class NatsServerNotSharedError extends Error {
  constructor(
    readonly home: string,
    readonly record: ServerRecord,
  ) {
    super(
      `the NATS server of ${home} at ${record.url} is the embedded server of akbe process ${record.ownerPid}, which stops it when it exits; ` +
        `a run needs a server that stays: start one with akbe nats up once ${record.ownerPid} is done, or pass --nats URL`,
    );
    this.name = 'NatsServerNotSharedError';
  }
}

/** True when a run in this process may use `record`: it stays until `akbe nats down`, or it is ours. */
export function runMayJoin(record: ServerRecord, pid = process.pid): boolean {
  return record.mode === 'detached' || record.ownerPid === pid;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const claimPath = (home: string) => join(natsDir(home), 'server.starting');

/**
 * Claims the right to start this home's server: resolves with the release once no other live
 * process holds the claim (a claim whose process died is taken over). The caller re-reads the
 * record after the claim: the previous holder may have started the server meanwhile.
 */
export async function claimServerStart(home: string, timeoutMs = 20_000): Promise<() => void> {
  mkdirSync(natsDir(home), { recursive: true });
  const path = claimPath(home);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        if (holderOf(path) === process.pid) rmSync(path, { force: true });
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = holderOf(path);
    if (holder === null ? staleEmpty(path) : !pidAlive(holder)) rmSync(path, { force: true });
    else if (Date.now() > deadline)
      throw new Error(
        `akbe process ${holder} has been starting the NATS server of ${home} for ${timeoutMs} ms (${path})`,
      );
    else await new Promise((r) => setTimeout(r, 50));
  }
}

/** An empty claim is one being written, unless it has been empty for a second (its writer died). */
function staleEmpty(path: string): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs > 1_000;
  } catch {
    return false;
  }
}

function holderOf(path: string): number | null {
  try {
    const pid = Number(readFileSync(path, 'utf8'));
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}
