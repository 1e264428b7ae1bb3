/**
 * The NATS server lifecycle: connect to `NATS_URL`, or start a private nats-server child process
 * with JetStream under the project data dir, wait until it is ready and stop it on exit.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';

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
}

export interface LocalNatsServer extends AsyncDisposable {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  readonly pid: number;
  readonly process: ChildProcess;
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
  // detached server with its log in a file: see src/actors/connection.ts).
  process.once('exit', () => {
    for (const child of running) child.kill('SIGKILL');
  });
}

/** Starts nats-server with JetStream and resolves once it accepts clients. */
export async function startNatsServer(opts: StartNatsOptions): Promise<LocalNatsServer> {
  const binary = opts.binary ?? findNatsServerBinary();
  if (!binary) throw new NatsServerMissingError();
  mkdirSync(opts.storeDir, { recursive: true });
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 0;
  const args = [
    '-a',
    host,
    '-p',
    port === 0 ? '-1' : String(port),
    '-js',
    '-sd',
    opts.storeDir,
    ...(opts.args ?? []),
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  installExitHook();
  let log = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => running.delete(child));

  const actualPort = await new Promise<number>((resolve, reject) => {
    let clientPort = 0;
    const timer = setTimeout(
      () =>
        reject(
          new NatsServerStartError(
            `nats-server did not become ready within ${opts.readyTimeoutMs ?? 10_000} ms`,
            log,
          ),
        ),
      opts.readyTimeoutMs ?? 10_000,
    );
    const onData = (chunk: Buffer) => {
      // Keep only the tail: a long run's server log must not grow this process's memory.
      log = (log + chunk.toString()).slice(-16_384);
      const m = /Listening for client connections on [^\s]*:(\d+)/.exec(log);
      if (m) clientPort = Number(m[1]);
      if (clientPort && /Server is ready/.test(log)) {
        clearTimeout(timer);
        resolve(clientPort);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new NatsServerStartError(`nats-server failed to start: ${err.message}`, log));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(
        new NatsServerStartError(
          `nats-server exited with code ${code} before it was ready: ${lastLines(log)}`,
          log,
        ),
      );
    });
  });

  const stopWith = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  return {
    url: `nats://${host}:${actualPort}`,
    port: actualPort,
    storeDir: opts.storeDir,
    pid: child.pid!,
    process: child,
    stop: () => stopWith('SIGTERM'),
    kill: () => stopWith('SIGKILL'),
    [Symbol.asyncDispose]: () => stopWith('SIGTERM'),
  };
}

function lastLines(log: string): string {
  return log.trim().split('\n').slice(-3).join(' | ');
}
