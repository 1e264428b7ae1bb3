/**
 * How akbe finds its NATS server, in order:
 * 1. an explicit URL (`--nats URL`) or `NATS_URL`: connect there;
 * 2. a server started by `akbe nats up` (or another akbe process's embedded server), recorded in
 *    `<home>/nats/server.json` (home = `AKBE_HOME` or `./.akbe`), if its process is alive;
 * 3. otherwise an embedded nats-server child process with JetStream stored under `<home>/nats`,
 *    stopped when the connection is closed (or this process exits). It records itself in
 *    server.json so that a second akbe process (e.g. `akbe events tail` beside a training run)
 *    joins it instead of starting a second server on the same store directory.
 *
 *   await using nats = await connectAkbeNats();
 *   const store = await EventStore.open(nats.nc);
 */
import { spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  findNatsServerBinary,
  type LocalNatsServer,
  NatsServerMissingError,
  NatsServerStartError,
  startNatsServer,
} from './nats-server.js';

export class NatsConnectError extends Error {
  constructor(
    readonly url: string,
    readonly source: NatsSource,
    opts?: ErrorOptions,
  ) {
    const hint =
      source === 'env'
        ? 'check NATS_URL or unset it to use a local server'
        : source === 'flag'
          ? 'check --nats'
          : 'run akbe nats down && akbe nats up';
    super(
      `cannot connect to NATS at ${url} (${source}): ${(opts?.cause as Error | undefined)?.message ?? 'unknown error'}; ${hint}`,
      opts,
    );
    this.name = 'NatsConnectError';
  }
}

export type NatsSource = 'flag' | 'env' | 'running' | 'embedded';

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

export interface AkbeNats extends AsyncDisposable {
  nc: NatsConnection;
  url: string;
  source: NatsSource;
  /** The embedded server this handle owns (stopped by close), when it started one. */
  server?: LocalNatsServer;
  /** Drains the connection and stops an owned embedded server. */
  close(): Promise<void>;
}

export interface ConnectAkbeOptions {
  /** Explicit server URL; wins over NATS_URL. */
  url?: string;
  env?: NodeJS.ProcessEnv;
  /** Project data dir; default AKBE_HOME or ./.akbe. */
  home?: string;
  /** Connection name shown by the server. */
  name?: string;
  /** Allow starting an embedded server (default true). */
  embedded?: boolean;
}

export function akbeHome(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.AKBE_HOME || '.akbe');
}

export function natsDir(home: string): string {
  return join(home, 'nats');
}

function recordPath(home: string): string {
  return join(natsDir(home), 'server.json');
}

export function readServerRecord(home: string): ServerRecord | null {
  try {
    return JSON.parse(readFileSync(recordPath(home), 'utf8')) as ServerRecord;
  } catch {
    return null;
  }
}

export function writeServerRecord(home: string, record: ServerRecord): void {
  mkdirSync(natsDir(home), { recursive: true });
  writeFileSync(recordPath(home), `${JSON.stringify(record, null, 2)}\n`);
}

/** Removes server.json, but only when it still describes `pid` (another server may have replaced it). */
export function removeServerRecord(home: string, pid: number): void {
  if (readServerRecord(home)?.pid === pid) rmSync(recordPath(home), { force: true });
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
  rmSync(recordPath(home), { force: true });
  return null;
}

async function tryConnect(url: string, source: NatsSource, name: string): Promise<NatsConnection> {
  try {
    // A cluster is given as a comma-separated list (NATS_URL=nats://a:4301,nats://b:4302).
    const servers = url
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    return await connect({ servers, name, timeout: 5_000 });
  } catch (err) {
    throw new NatsConnectError(url, source, { cause: err });
  }
}

export async function connectAkbeNats(opts: ConnectAkbeOptions = {}): Promise<AkbeNats> {
  const env = opts.env ?? process.env;
  const name = opts.name ?? `akbe-${process.pid}`;
  const explicit = opts.url
    ? { url: opts.url, source: 'flag' as const }
    : env.NATS_URL
      ? { url: env.NATS_URL, source: 'env' as const }
      : null;
  const handle = (
    nc: NatsConnection,
    url: string,
    source: NatsSource,
    server?: LocalNatsServer,
    onClose?: () => void,
  ): AkbeNats => {
    let closing: Promise<void> | undefined;
    const close = () => {
      closing ??= (async () => {
        await nc.drain().catch(() => nc.close());
        if (server) {
          await server.stop();
          onClose?.();
        }
      })();
      return closing;
    };
    return { nc, url, source, server, close, [Symbol.asyncDispose]: close };
  };
  if (explicit)
    return handle(await tryConnect(explicit.url, explicit.source, name), explicit.url, explicit.source);

  const home = opts.home ?? akbeHome(env);
  const running = liveServerRecord(home);
  if (running) return handle(await tryConnect(running.url, 'running', name), running.url, 'running');
  if (opts.embedded === false)
    throw new Error(
      `no NATS server: set NATS_URL or start one with akbe nats up (looked in ${recordPath(home)})`,
    );

  const storeDir = natsDir(home);
  const server = await startNatsServer({ storeDir });
  writeServerRecord(home, {
    pid: server.pid,
    port: server.port,
    url: server.url,
    storeDir,
    mode: 'embedded',
    ownerPid: process.pid,
    startedAt: new Date().toISOString(),
  });
  try {
    const nc = await tryConnect(server.url, 'embedded', name);
    return handle(nc, server.url, 'embedded', server, () => removeServerRecord(home, server.pid));
  } catch (err) {
    await server.stop();
    removeServerRecord(home, server.pid);
    throw err;
  }
}

/**
 * Starts a nats-server that outlives this process (`akbe nats up`). Its output goes to
 * `<home>/nats/server.log` (a detached server must not write to a pipe nobody reads: nats-server
 * would die of SIGPIPE at its next log line); readiness and the port are read from that log.
 */
export async function startDetachedNatsServer(
  home: string,
  opts: { port?: number; config?: string; readyTimeoutMs?: number } = {},
): Promise<ServerRecord> {
  const binary = findNatsServerBinary();
  if (!binary) throw new NatsServerMissingError();
  const storeDir = natsDir(home);
  mkdirSync(storeDir, { recursive: true });
  const logFile = join(storeDir, 'server.log');
  const offset = existsSync(logFile) ? statSync(logFile).size : 0;
  const fd = openSync(logFile, 'a');
  const args = [
    ...(opts.config ? ['-c', opts.config] : []),
    '-a',
    '127.0.0.1',
    '-p',
    opts.port ? String(opts.port) : '-1',
    '-js',
    '-sd',
    storeDir,
  ];
  const child = spawn(binary, args, { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  let exited: number | null = null;
  child.once('exit', (code) => {
    exited = code ?? -1;
  });
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 10_000);
  let log = '';
  let port = 0;
  while (Date.now() < deadline) {
    log = readFileSync(logFile, 'utf8').slice(offset);
    const m = /Listening for client connections on [^\s]*:(\d+)/.exec(log);
    if (m) port = Number(m[1]);
    if (port && /Server is ready/.test(log)) break;
    if (exited !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!port || exited !== null || !/Server is ready/.test(log)) {
    if (exited === null) child.kill('SIGKILL');
    throw new NatsServerStartError(
      `nats-server did not start (see ${logFile}): ${log.trim().split('\n').slice(-2).join(' | ')}`,
      log,
    );
  }
  child.unref();
  const record: ServerRecord = {
    pid: child.pid!,
    port,
    url: `nats://127.0.0.1:${port}`,
    storeDir,
    mode: 'detached',
    ownerPid: child.pid!,
    startedAt: new Date().toISOString(),
    logFile,
  };
  writeServerRecord(home, record);
  return record;
}

/** Stops a recorded server by pid (SIGTERM, then SIGKILL after `graceMs`) and removes the record. */
export async function stopRecordedServer(
  home: string,
  record: ServerRecord,
  graceMs = 10_000,
): Promise<void> {
  if (isNatsServerAlive(record.pid)) {
    process.kill(record.pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (isNatsServerAlive(record.pid) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    if (isNatsServerAlive(record.pid)) process.kill(record.pid, 'SIGKILL');
  }
  removeServerRecord(home, record.pid);
}
