/**
 * `akbe nats up|down|status|auth`: a local nats-server (JetStream, store under <home>/nats) that
 * outlives one command, so that a training run, `akbe events tail` and other tools share it.
 * Every server requires credentials: `akbe nats auth` writes (once) the per-role nkey seeds and
 * the server's auth.conf (docs/security.md).
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { existsSync } from 'node:fs';
import { type CommandSpec, intFlag, UsageError } from '../command.js';
import { HOME_FLAG, NATS_TRUST_FLAGS } from '../common-flags.js';

/** `--tls-host NAME`: a host (DNS name or IP) the servers' certificate must name too (nats-tls.ts). */
const TLS_HOST_FLAG = {
  type: 'string',
  value: 'HOST',
  multiple: true,
  description:
    'also name HOST (DNS name or IP) in the server certificate: a cluster node elsewhere (and AKBE_NATS_TLS_HOSTS)',
} as const;

async function connection() {
  return import('../../actors/nats/connection.js');
}

async function detachedServer() {
  return import('../../actors/nats/detached-server.js');
}

function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

const up: CommandSpec = {
  path: ['nats', 'up'],
  summary: 'start a local nats-server with JetStream that keeps running (records <home>/nats/server.json)',
  flags: {
    home: HOME_FLAG,
    port: { type: 'string', value: 'PORT', description: 'client port (default: a free one)' },
    config: {
      type: 'string',
      value: 'FILE',
      description: 'nats-server config file, e.g. infra/nats/nats-server.conf',
    },
    'tls-host': TLS_HOST_FLAG,
  },
  async run(ctx) {
    const port = intFlag(ctx, 'port', { min: 1, max: 65535 });
    const { akbeHome, liveServerRecord } = await connection();
    const { startDetachedNatsServer } = await detachedServer();
    const home = typeof ctx.flags.home === 'string' ? ctx.flags.home : akbeHome();
    const config = ctx.flags.config as string | undefined;
    if (config !== undefined) {
      if (!existsSync(config)) throw new UsageError(`--config: no such file '${config}'`);
    }
    const running = liveServerRecord(home);
    if (running) {
      ctx.out.write(`nats: already running (${running.mode}) pid ${running.pid} at ${running.url}\n`);
      return 0;
    }
    const tlsHosts = (ctx.flags['tls-host'] as string[] | undefined) ?? [];
    const record = await startDetachedNatsServer(home, { port, config, tlsHosts });
    ctx.out.write(
      `nats: started pid ${record.pid} at ${record.url} (store ${record.storeDir}, log ${record.logFile})\n`,
    );
    ctx.out.write(`nats: other shells find it automatically, or: export NATS_URL=${record.url}\n`);
    return 0;
  },
};

const down: CommandSpec = {
  path: ['nats', 'down'],
  summary: 'stop the nats-server started by akbe nats up',
  flags: { home: HOME_FLAG },
  async run(ctx) {
    const { akbeHome, liveServerRecord } = await connection();
    const { stopRecordedServer } = await detachedServer();
    const home = typeof ctx.flags.home === 'string' ? ctx.flags.home : akbeHome();
    const record = liveServerRecord(home);
    if (!record) {
      ctx.out.write('nats: not running\n');
      return 0;
    }
    if (record.mode === 'embedded' && isProcessAlive(record.ownerPid)) {
      throw new Error(
        `the server at ${record.url} belongs to akbe process ${record.ownerPid} (embedded); it stops when that process ends`,
      );
    }
    await stopRecordedServer(home, record);
    // An embedded server whose akbe died (SIGKILL) is an orphan: nobody else would stop it.
    ctx.out.write(
      `nats: stopped pid ${record.pid}${record.mode === 'embedded' ? ` (orphaned by akbe process ${record.ownerPid})` : ''}\n`,
    );
    return 0;
  },
};

const status: CommandSpec = {
  path: ['nats', 'status'],
  summary: 'show the NATS server akbe would use (url, pid) and its JetStream streams',
  flags: {
    home: HOME_FLAG,
    nats: {
      type: 'string',
      value: 'URL',
      description: 'server URL (default: NATS_URL, then the recorded server)',
    },
    ...NATS_TRUST_FLAGS,
  },
  async run(ctx) {
    const { akbeHome, connectAkbeNats, liveServerRecord } = await connection();
    const { streamSummaries } = await import('../../actors/nats/stream-summaries.js');
    const home = typeof ctx.flags.home === 'string' ? ctx.flags.home : akbeHome();
    const url = ctx.flags.nats as string | undefined;
    const record = url || process.env.NATS_URL ? null : liveServerRecord(home);
    if (!url && !process.env.NATS_URL && !record) {
      ctx.out.write(
        'nats: not running (start it with: akbe nats up; only a run, akbe train or akbe experiment run, starts an embedded server of its own)\n',
      );
      return 1;
    }
    await using nats = await connectAkbeNats({ url, home, embedded: false });
    const where = record
      ? `${record.mode} pid ${record.pid}, store ${record.storeDir}`
      : nats.source === 'env'
        ? 'from NATS_URL'
        : 'from --nats';
    ctx.out.write(`nats: running at ${nats.url} (${where}), server ${nats.nc.info?.version ?? '?'}\n`);
    const streams = await streamSummaries(nats.nc);
    if (!streams) {
      ctx.out.write('jetstream: not enabled on this server\n');
      return 1;
    }
    if (streams.length === 0) ctx.out.write('streams: none yet\n');
    else ctx.out.write('streams:\n');
    for (const s of streams) {
      ctx.out.write(
        `  ${s.name.padEnd(20)} ${String(s.messages).padStart(9)} msgs ${fmtBytes(s.bytes).padStart(10)}  seq ${s.firstSeq}..${s.lastSeq}  consumers ${s.consumers}  replicas ${s.replicas}  subjects ${s.subjects.join(' ')}\n`,
      );
    }
    return 0;
  },
};

/** True while `pid` runs (EPERM: it runs as another user). */
function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const auth: CommandSpec = {
  path: ['nats', 'auth'],
  summary:
    "create the NATS credentials (an nkey seed per role, 0600), the server auth.conf and the home CA with the servers' TLS certificate; print where",
  flags: { home: HOME_FLAG, 'tls-host': TLS_HOST_FLAG },
  async run(ctx) {
    const { akbeHome } = await connection();
    const { ensureNatsAuth, natsAuthDir, NATS_ROLES, seedPath, authConfPath } = await import(
      '../../actors/nats/nats-auth.js'
    );
    const home = typeof ctx.flags.home === 'string' ? ctx.flags.home : akbeHome();
    const dir = ensureNatsAuth(natsAuthDir(home));
    ctx.out.write(`nats auth: ${authConfPath(dir)} (server: include it, or akbe nats up loads it)\n`);
    for (const role of NATS_ROLES) ctx.out.write(`  ${role.padEnd(12)} ${seedPath(dir, role)}\n`);
    const { ensureNatsTls, natsTlsDir, tlsHosts, certificateHosts } = await import(
      '../../actors/nats/nats-tls.js'
    );
    const tls = ensureNatsTls(
      natsTlsDir(home),
      tlsHosts(process.env, (ctx.flags['tls-host'] as string[]) ?? []),
    );
    const { X509Certificate } = await import('node:crypto');
    const { readFileSync } = await import('node:fs');
    const hosts = certificateHosts(new X509Certificate(readFileSync(tls.certFile)));
    ctx.out.write(`nats tls: CA ${tls.caFile} (clients pin it; the key ca-key.pem stays here)\n`);
    ctx.out.write(`  server       ${tls.certFile} + server-key.pem, for ${hosts.join(', ')}\n`);
    ctx.out.write(
      'a worker elsewhere: copy its role seed there (mode 0600) and ca.pem, and set AKBE_NATS_CREDS=<file> AKBE_NATS_TLS_CA=<ca.pem> (docs/security.md)\n',
    );
    return 0;
  },
};

export const natsCommands: CommandSpec[] = [up, down, status, auth];
