/**
 * `akbe nats up|down|status`: a local nats-server (JetStream, store under <home>/nats) that
 * outlives one command, so that a training run, `akbe events tail` and other tools share it.
 */
import { type CommandSpec, intFlag, UsageError } from '../command.js';
import { HOME_FLAG } from '../common-flags.js';

async function connection() {
  return import('../../actors/connection.js');
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
  },
  async run(ctx) {
    const port = intFlag(ctx, 'port', { min: 1, max: 65535 });
    const { akbeHome, liveServerRecord, startDetachedNatsServer } = await connection();
    const home = typeof ctx.flags.home === 'string' ? ctx.flags.home : akbeHome();
    const config = ctx.flags.config as string | undefined;
    if (config !== undefined) {
      const { existsSync } = await import('node:fs');
      if (!existsSync(config)) throw new UsageError(`--config: no such file '${config}'`);
    }
    const running = liveServerRecord(home);
    if (running) {
      ctx.out.write(`nats: already running (${running.mode}) pid ${running.pid} at ${running.url}\n`);
      return 0;
    }
    const record = await startDetachedNatsServer(home, { port, config });
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
    const { akbeHome, liveServerRecord, stopRecordedServer } = await connection();
    const home = typeof ctx.flags.home === 'string' ? ctx.flags.home : akbeHome();
    const record = liveServerRecord(home);
    if (!record) {
      ctx.out.write('nats: not running\n');
      return 0;
    }
    if (record.mode === 'embedded') {
      throw new Error(
        `the server at ${record.url} belongs to akbe process ${record.ownerPid} (embedded); it stops when that process ends`,
      );
    }
    await stopRecordedServer(home, record);
    ctx.out.write(`nats: stopped pid ${record.pid}\n`);
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
  },
  async run(ctx) {
    const { akbeHome, connectAkbeNats, liveServerRecord } = await connection();
    const home = typeof ctx.flags.home === 'string' ? ctx.flags.home : akbeHome();
    const url = ctx.flags.nats as string | undefined;
    const record = url || process.env.NATS_URL ? null : liveServerRecord(home);
    if (!url && !process.env.NATS_URL && !record) {
      ctx.out.write(
        'nats: not running (start it with: akbe nats up; commands start an embedded server when none runs)\n',
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
    const { jetstreamManager } = await import('@nats-io/jetstream');
    let jsm: Awaited<ReturnType<typeof jetstreamManager>>;
    try {
      jsm = await jetstreamManager(nats.nc);
    } catch {
      ctx.out.write('jetstream: not enabled on this server\n');
      return 1;
    }
    const streams = [];
    for await (const si of jsm.streams.list()) streams.push(si);
    if (streams.length === 0) ctx.out.write('streams: none yet\n');
    else ctx.out.write('streams:\n');
    for (const si of streams.sort((a, b) => a.config.name.localeCompare(b.config.name))) {
      const s = si.state;
      ctx.out.write(
        `  ${si.config.name.padEnd(20)} ${String(s.messages).padStart(9)} msgs ${fmtBytes(s.bytes).padStart(10)}  seq ${s.first_seq}..${s.last_seq}  consumers ${s.consumer_count}  replicas ${si.config.num_replicas}  subjects ${(si.config.subjects ?? []).join(' ')}\n`,
      );
    }
    return 0;
  },
};

export const natsCommands: CommandSpec[] = [up, down, status];
