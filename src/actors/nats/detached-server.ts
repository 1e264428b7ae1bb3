/**
 * `akbe nats up` and `akbe nats down`: a nats-server that outlives the process that started it,
 * recorded in server.json (server-record.ts) so that later akbe processes join it.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ensureNatsAuth, natsAuthDir } from './nats-auth.js';
import {
  findNatsServerBinary,
  NatsServerMissingError,
  NatsServerStartError,
  registerLocalServer,
  writeServerConf,
} from './nats-server.js';
import { ensureNatsTls, natsTlsDir, tlsHosts } from './nats-tls.js';
import {
  isNatsServerAlive,
  natsDir,
  removeServerRecord,
  type ServerRecord,
  writeServerRecord,
} from './server-record.js';

/**
 * Starts a nats-server that outlives this process (`akbe nats up`). Its output goes to
 * `<home>/nats/server.log` (a detached server must not write to a pipe nobody reads: nats-server
 * would die of SIGPIPE at its next log line); readiness and the port are read from that log.
 */
export async function startDetachedNatsServer(
  home: string,
  opts: {
    port?: number;
    config?: string;
    readyTimeoutMs?: number;
    env?: NodeJS.ProcessEnv;
    /** More hosts the server certificate must name (`--tls-host`; nats-tls.ts). */
    tlsHosts?: string[];
  } = {},
): Promise<ServerRecord> {
  const binary = findNatsServerBinary();
  if (!binary) throw new NatsServerMissingError();
  // Seeds exist before the server starts, so clients (and a --config that includes the
  // generated auth.conf, as infra/nats does) find them.
  const authDir = ensureNatsAuth(natsAuthDir(home, opts.env));
  const tls = ensureNatsTls(natsTlsDir(home), tlsHosts(opts.env, opts.tlsHosts));
  const storeDir = natsDir(home);
  mkdirSync(storeDir, { recursive: true });
  const logFile = join(storeDir, 'server.log');
  const offset = existsSync(logFile) ? statSync(logFile).size : 0;
  const fd = openSync(logFile, 'a');
  const args = [
    // A --config brings its own authorization (infra/nats includes the generated auth.conf); the
    // home's certificate is given on the command line, which wins over a config's, so the server
    // proves itself with the CA its clients pin whatever the config says.
    ...(opts.config
      ? ['-c', opts.config, '--tls', '--tlscert', tls.certFile, '--tlskey', tls.keyFile]
      : ['-c', writeServerConf(join(storeDir, 'akbe-server.conf'), authDir, tls)]),
    '-a',
    '127.0.0.1',
    '-p',
    opts.port ? String(opts.port) : '-1',
    '-js',
    // nats-server 2.9 refuses `-sd` beside a config's own store_dir ("Duplicate 'store_dir'"):
    // with --config the store is the config's (infra/nats: .akbe/nats, the default home's).
    ...(opts.config ? [] : ['-sd', storeDir]),
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
  const stored = /Store Directory: "([^"]+)"/.exec(log)?.[1];
  const record: ServerRecord = {
    pid: child.pid!,
    port,
    url: `nats://127.0.0.1:${port}`,
    // The JetStream folder's parent, as `-sd` names it (what the server printed, with --config).
    storeDir: opts.config && stored ? resolve(stored.replace(/\/jetstream\/?$/, '')) : storeDir,
    mode: 'detached',
    ownerPid: child.pid!,
    startedAt: new Date().toISOString(),
    logFile,
  };
  writeServerRecord(home, record);
  registerLocalServer(port, record.pid, authDir, tls.caFile);
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
