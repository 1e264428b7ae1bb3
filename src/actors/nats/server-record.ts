/**
 * The record of a running nats-server that akbe processes share: `<home>/nats/server.json`
 * (home = `AKBE_HOME` or `../.akbe`), written by `akbe nats up` or by the process that started an
 * embedded server, and the checks that its process is still alive (connection.ts reads it).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type LocalServerEntry, readLocalServer } from './nats-server.js';

export interface ServerRecord {
  pid: number;
  port: number;
  url: string;
  storeDir: string;
  /** 'detached': `akbe nats up`; 'embedded': owned by the akbe process `ownerPid`. */
  mode: 'detached' | 'embedded';
  ownerPid: number;
  startedAt: string;
  logFile?: string;
}

export function akbeHome(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.AKBE_HOME || '.akbe');
}

export function natsDir(home: string): string {
  return join(home, 'nats');
}

export function serverRecordPath(home: string): string {
  return join(natsDir(home), 'server.json');
}

export function readServerRecord(home: string): ServerRecord | null {
  try {
    return JSON.parse(readFileSync(serverRecordPath(home), 'utf8')) as ServerRecord;
  } catch {
    return null;
  }
}

export function writeServerRecord(home: string, record: ServerRecord): void {
  mkdirSync(natsDir(home), { recursive: true });
  writeFileSync(serverRecordPath(home), `${JSON.stringify(record, null, 2)}\n`);
}

/** Removes server.json, but only when it still describes `pid` (another server may have replaced it). */
export function removeServerRecord(home: string, pid: number): void {
  if (readServerRecord(home)?.pid === pid) rmSync(serverRecordPath(home), { force: true });
}

/** True when `pid` is a live nats-server process (checked by name where /proc exists, against pid reuse). */
export function isNatsServerAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (cmdline === '') return false; // a zombie
    return cmdline.includes('nats-server');
  } catch {
    return !existsSync('/proc/self');
  }
}

/** The recorded server, when its process is alive; a stale record is removed. */
export function liveServerRecord(home: string): ServerRecord | null {
  const record = readServerRecord(home);
  if (!record) return null;
  if (isNatsServerAlive(record.pid)) return record;
  rmSync(serverRecordPath(home), { force: true });
  return null;
}

/**
 * The registry entry of the akbe-started server at a loopback `url`, when one is registered and
 * alive (src/actors/nats/nats-server.ts: registerLocalServer): its auth dir and CA.
 */
export function localServerEntry(url: string): LocalServerEntry | null {
  const m = /^(?:nats|tls):\/\/(?:127\.0\.0\.1|localhost):(\d+)$/.exec(url.split(',')[0].trim());
  if (!m) return null;
  const entry = readLocalServer(Number(m[1]));
  return entry && isNatsServerAlive(entry.pid) ? entry : null;
}

/** The auth dir of the akbe-started server at a loopback `url` (see localServerEntry). */
export function localServerAuthDir(url: string): string | null {
  return localServerEntry(url)?.authDir ?? null;
}
