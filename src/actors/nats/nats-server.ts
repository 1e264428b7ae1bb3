/**
 * The NATS server lifecycle: start a private nats-server child process with JetStream under the
 * project data dir, requiring credentials (src/actors/nats/nats-auth.ts), wait until it is ready and
 * stop it on exit. A watchdog stops it too when this process dies without running exit hooks
 * (SIGKILL, OOM): akbe's own server never outlives akbe for more than about a second.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, lstatSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { authConfPath, ensureNatsAuth, natsAuthDir } from './nats-auth.js';
import { ensureNatsTls, type NatsTlsFiles, natsTlsDir } from './nats-tls.js';

export const NATS_INSTALL_HINT = 'apt-get install -y nats-server';

export class NatsServerMissingError extends Error {
  constructor() {
    super(
      `nats-server not found on PATH or at /usr/sbin/nats-server; install it with: ${NATS_INSTALL_HINT} (or set NATS_URL)`,
    );
    this.name = 'NatsServerMissingError';
  }
}

export class NatsServerStartError extends Error {
  constructor(
    message: string,
    readonly log: string,
  ) {
    super(message);
    this.name = 'NatsServerStartError';
  }
}

/** The nats-server binary: PATH first, then Debian's location. Null when there is none. */
export function findNatsServerBinary(
  env: NodeJS.ProcessEnv = process.env,
  fallbacks: readonly string[] = ['/usr/sbin/nats-server'],
): string | null {
  const dirs = (env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const candidate of [...dirs.map((d) => join(d, 'nats-server')), ...fallbacks]) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return null;
}

export interface StartNatsOptions {
  /** JetStream store directory (created if missing). */
  storeDir: string;
  /** Client port; 0 (default) lets the server pick a free one. */
  port?: number;
  host?: string;
  /** Milliseconds to wait for "Server is ready". */
  readyTimeoutMs?: number;
  /** Extra command-line arguments (e.g. `['-c', 'infra/nats/nats-server.conf']`). */
  args?: string[];
  /** Path to the binary; found with `findNatsServerBinary` when omitted. */
  binary?: string;
  /**
   * Auth dir whose auth.conf the server loads (created with fresh seeds when missing). Default:
   * `AKBE_NATS_AUTH_DIR`, else `auth` beside the store dir. `false` runs an open server (only for
   * a caller that brings its own `-c` config with authorization in `args`).
   */
  auth?: string | false;
  /** Stop the server when this process dies, even by SIGKILL (default true). */
  watchParent?: boolean;
  /**
   * TLS dir (nats-tls.ts: the CA and the server certificate, created when missing) whose
   * certificate the server presents. Default: `<dirname(storeDir)>/nats/tls`, or `false` (no TLS)
   * when `auth` is false (the caller's own `-c` config says).
   */
  tls?: string | false;
}

export interface LocalNatsServer extends AsyncDisposable {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  readonly pid: number;
  readonly process: ChildProcess;
  /** The auth dir the server trusts (seeds `<role>.nk` inside), or null for an open server. */
  readonly authDir: string | null;
  /** The CA whose certificate the server presents (what its clients pin), or null without TLS. */
  readonly caFile: string | null;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and waits for it to exit. */
  stop(): Promise<void>;
  /** Kills the server at once (SIGKILL), as a crash would. */
  kill(): Promise<void>;
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A child server must never outlive the process that started it (`akbe nats up` spawns its own
  // detached server with its log in a file: see src/actors/nats/connection.ts).
  process.once('exit', () => {
    for (const child of running) child.kill('SIGKILL');
  });
}

/** Starts nats-server with JetStream and resolves once it accepts clients. */
export async function startNatsServer(opts: StartNatsOptions): Promise<LocalNatsServer> {
  const binary = opts.binary ?? findNatsServerBinary();
  if (!binary) throw new NatsServerMissingError();
  const plan = planServer(opts);
  const spawned = spawnTracked(binary, plan.args);
  const port = await waitUntilReady(spawned, opts.readyTimeoutMs ?? 10_000);
  return serverHandle(opts, plan, spawned, port);
}

/** What a server is started with: its address, the auth and TLS dirs (made when missing) and argv. */
interface ServerPlan {
  host: string;
  authDir: string | null;
  tls: NatsTlsFiles | null;
  args: string[];
}

function planServer(opts: StartNatsOptions): ServerPlan {
  mkdirSync(opts.storeDir, { recursive: true });
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 0;
  const authDir =
    opts.auth === false ? null : ensureNatsAuth(opts.auth ?? natsAuthDir(dirname(opts.storeDir)));
  const tlsDir = opts.tls ?? (opts.auth === false ? false : natsTlsDir(dirname(opts.storeDir)));
  const tls = tlsDir === false ? null : ensureNatsTls(tlsDir);
  const conf = authDir || tls ? writeServerConf(join(opts.storeDir, 'akbe-server.conf'), authDir, tls) : null;
  const args = [
    ...(conf ? ['-c', conf] : []),
    '-a',
    host,
    '-p',
    port === 0 ? '-1' : String(port),
    '-js',
    '-sd',
    opts.storeDir,
    ...(opts.args ?? []),
  ];
  return { host, authDir, tls, args };
}

/** A started child server, with the tail of its output (read for the whole of its life). */
interface SpawnedServer {
  child: ChildProcess;
  exited: Promise<void>;
  log(): string;
}

/**
 * Spawns the server, killed by the exit hook if this process exits first. Its output is read
 * for as long as it runs (an unread pipe would fill and block the server), and only the tail
 * is kept: a long run's server log must not grow this process's memory.
 */
function spawnTracked(binary: string, args: string[]): SpawnedServer {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  installExitHook();
  let log = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => running.delete(child));
  const onData = (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-16_384);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  return { child, exited, log: () => log };
}

/** Resolves with the client port once the log says "Server is ready"; rejects on exit or timeout. */
function waitUntilReady({ child, log }: SpawnedServer, timeoutMs: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let clientPort = 0;
    const done = () => {
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.stderr!.off('data', onData);
    };
    const timer = setTimeout(() => {
      done();
      reject(new NatsServerStartError(`nats-server did not become ready within ${timeoutMs} ms`, log()));
    }, timeoutMs);
    // Registered after spawnTracked's listener, so log() already holds this chunk.
    const onData = () => {
      const m = /Listening for client connections on [^\s]*:(\d+)/.exec(log());
      if (m) clientPort = Number(m[1]);
      if (clientPort && /Server is ready/.test(log())) {
        done();
        resolve(clientPort);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (err) => {
      done();
      reject(new NatsServerStartError(`nats-server failed to start: ${err.message}`, log()));
    });
    child.once('exit', (code) => {
      done();
      reject(
        new NatsServerStartError(
          `nats-server exited with code ${code} before it was ready: ${lastLines(log())}`,
          log(),
        ),
      );
    });
  });
}

/** The ready server's handle: registered for local clients, watched, and stopped on request. */
function serverHandle(
  opts: StartNatsOptions,
  { host, authDir, tls }: ServerPlan,
  { child, exited }: SpawnedServer,
  port: number,
): LocalNatsServer {
  const watchdog = opts.watchParent === false ? null : watchParent(child.pid!);
  if (authDir) registerLocalServer(port, child.pid!, authDir, tls?.caFile);
  child.once('exit', () => unregisterLocalServer(port, child.pid!));
  const stopWith = async (signal: NodeJS.Signals) => {
    watchdog?.kill('SIGKILL');
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  child.once('exit', () => watchdog?.kill('SIGKILL'));
  return {
    url: `nats://${host}:${port}`,
    port,
    storeDir: opts.storeDir,
    pid: child.pid!,
    process: child,
    authDir,
    caFile: tls?.caFile ?? null,
    stop: () => stopWith('SIGTERM'),
    kill: () => stopWith('SIGKILL'),
    [Symbol.asyncDispose]: () => stopWith('SIGTERM'),
  };
}

/**
 * The config akbe's own servers load: the generated users (auth.conf, included by a path relative
 * to this file, as nats-server resolves includes) and TLS with the home CA's server certificate.
 * The handshake timeout is 5 s, not the default, so a loaded machine does not drop clients.
 */
export function writeServerConf(path: string, authDir: string | null, tls: NatsTlsFiles | null): string {
  const lines = [
    ...(authDir ? [`include ${JSON.stringify(relative(dirname(path), authConfPath(authDir)))}`] : []),
    ...(tls ? [tlsBlock(tls)] : []),
  ];
  writeFileSync(path, `${lines.join('\n')}\n`, { mode: 0o600 });
  return path;
}

/** A `tls { }` block for clients (and, with `verify`, for cluster routes: both sides present it). */
export function tlsBlock(tls: NatsTlsFiles, opts: { verify?: boolean; indent?: string } = {}): string {
  const i = opts.indent ?? '';
  return [
    `${i}tls {`,
    `${i}  cert_file: ${JSON.stringify(tls.certFile)}`,
    `${i}  key_file: ${JSON.stringify(tls.keyFile)}`,
    ...(opts.verify ? [`${i}  ca_file: ${JSON.stringify(tls.caFile)}`, `${i}  verify: true`] : []),
    `${i}  timeout: 5`,
    `${i}}`,
  ].join('\n');
}

/**
 * A tiny sh process that polls this process's pid each second and stops the server once it is
 * gone: exit hooks do not run on SIGKILL, and Node cannot ask the kernel for PR_SET_PDEATHSIG.
 * It checks that the pid still runs nats-server before signalling (pids are reused).
 */
export function watchParent(serverPid: number, parentPid = process.pid): ChildProcess {
  const script = [
    `while kill -0 ${parentPid} 2>/dev/null && kill -0 ${serverPid} 2>/dev/null; do sleep 1; done`,
    `grep -q nats-server /proc/${serverPid}/cmdline 2>/dev/null || exit 0`,
    `kill -TERM ${serverPid} 2>/dev/null; sleep 5`,
    `grep -q nats-server /proc/${serverPid}/cmdline 2>/dev/null && kill -KILL ${serverPid} 2>/dev/null`,
    'exit 0',
  ].join('\n');
  const dog = spawn('/bin/sh', ['-c', script], { stdio: 'ignore', detached: true });
  dog.unref();
  return dog;
}

/**
 * Loopback servers akbe started, by port, with their auth dir: so that a client given only
 * `--nats nats://127.0.0.1:PORT` (a worker in another shell, a test's CLI child) finds the
 * credentials. The folder is this user's alone (0700, checked owner); seeds stay in the auth dir.
 */
export function localServerRegistry(): string | null {
  const dir = join(tmpdir(), `akbe-${process.getuid?.() ?? 'user'}`, 'nats-servers');
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    const parent = lstatSync(dirname(dir));
    const mine = (s: typeof st) =>
      s.isDirectory() && (process.getuid === undefined || s.uid === process.getuid());
    if (!mine(st) || !mine(parent) || (st.mode & 0o077) !== 0 || (parent.mode & 0o022) !== 0) return null;
    return dir;
  } catch {
    return null;
  }
}

export interface LocalServerEntry {
  pid: number;
  authDir: string;
  /** The CA the server's certificate is from (absent: no TLS, or an entry from before TLS). */
  caFile?: string;
}

export function registerLocalServer(port: number, pid: number, authDir: string, caFile?: string): void {
  const dir = localServerRegistry();
  const entry: LocalServerEntry = { pid, authDir, ...(caFile ? { caFile } : {}) };
  if (dir) writeFileSync(join(dir, `${port}.json`), JSON.stringify(entry), { mode: 0o600 });
}

export function unregisterLocalServer(port: number, pid: number): void {
  const dir = localServerRegistry();
  if (dir && readLocalServer(port)?.pid === pid) rmSync(join(dir, `${port}.json`), { force: true });
}

/** The registered entry for a loopback port (the caller checks that its pid still runs). */
export function readLocalServer(port: number): LocalServerEntry | null {
  const dir = localServerRegistry();
  if (!dir) return null;
  try {
    return JSON.parse(readFileSync(join(dir, `${port}.json`), 'utf8')) as LocalServerEntry;
  } catch {
    return null;
  }
}

function lastLines(log: string): string {
  return log.trim().split('\n').slice(-3).join(' | ');
}
