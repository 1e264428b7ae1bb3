import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { connectAkbeNats, isNatsServerAlive, readServerRecord } from '../src/actors/nats/connection.js';
import { type AkbeEvent, CURRENT_VERSION } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';
import { syntheticRunEvents } from './helpers/synthetic.js';

// These tests choose their server explicitly: never the one in the environment.
delete process.env.NATS_URL;

const nats = await withNats(t);
const url = nats.server.url;
const store = await EventStore.open(nats.nc);
const events = syntheticRunEvents({ runId: 'cli-run', steps: 2 });
await store.appendMany(events);

t.test('a bad flag or value exits 2 with one line naming it', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['events', 'tail', '--rum', 'x'], /unknown flag --rum/],
    [['events', 'tail'], /missing required flag --run/],
    [['events', 'export', '--run', 'a.b'], /--run must be 1-64 characters .*got 'a.b'/],
    [['events', 'export', '--run', 'x', '--format', 'csv'], /--format must be one of jsonl, got 'csv'/],
    [['events', 'tail', '--run', 'x', '--from-seq', 'zero'], /--from-seq must be an integer/],
    [['events', 'dead-letters', '--bytes'], /unknown flag --bytes/],
    [['nats', 'up', '--port', 'abc'], /--port must be an integer/],
    [['nats', 'status', '--bogus'], /unknown flag --bogus/],
    [['nats', 'down', '--home'], /flag --home needs a value/],
    [['demo', '--steps', '0'], /--steps must be >= 1/],
  ];
  for (const [argv, message] of cases) {
    const r = await runCli(...argv);
    t.equal(r.code, 2, argv.join(' '));
    t.match(r.err, message);
    t.equal(r.err.trim().split('\n').length, 1, 'one line');
  }
});

t.test('every events/nats/demo subcommand has --help', async (t) => {
  for (const path of [
    ['events', 'tail'],
    ['events', 'export'],
    ['events', 'dead-letters'],
    ['nats', 'up'],
    ['nats', 'down'],
    ['nats', 'status'],
    ['demo'],
  ]) {
    const r = await runCli(...path, '--help');
    t.equal(r.code, 0);
    t.match(r.out, new RegExp(`^usage: akbe ${path.join(' ')}`));
  }
});

t.test('export writes valid JSONL of every event of the run', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-export-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'run.jsonl');
  const r = await runCli(
    'events',
    'export',
    '--run',
    'cli-run',
    '--format',
    'jsonl',
    '--out',
    file,
    '--nats',
    url,
  );
  t.equal(r.code, 0, r.err);
  t.match(r.err, `exported ${events.length} events of run cli-run`);
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
  t.match(lines.pop(), /^\{"akbeExportSeal":/, 'the last line is the seal (test/export-seal.int.test.ts)');
  t.equal(lines.length, events.length);
  const parsed = lines.map((l) => JSON.parse(l) as AkbeEvent & { data: Record<string, unknown> });
  t.same(
    parsed.map((e) => e.meta.dedupeId),
    events.map((e) => e.meta.dedupeId),
  );
  const i = events.findIndex((e) => e.type === 'rollout.completed');
  const done = events[i] as Extract<AkbeEvent, { type: 'rollout.completed' }>;
  t.same(parsed[i].data.responseTokenIds, Array.from(done.data.responseTokenIds));
  t.same(parsed[i].data.oldLogprobs, Array.from(done.data.oldLogprobs));
  t.ok(
    parsed.every((e, k) => k === 0 || (e.meta.seq as number) > (parsed[k - 1].meta.seq as number)),
    'meta.seq increases',
  );

  const stdout = await runCli('events', 'export', '--run', 'cli-run', '--nats', url);
  t.equal(stdout.out.trimEnd().split('\n').length, events.length + 1, 'stdout by default, sealed too');
});

t.test('tail --once prints one line per stored event; tail follows until run.finished', async (t) => {
  const once = await runCli('events', 'tail', '--run', 'cli-run', '--once', '--nats', url);
  t.equal(once.code, 0);
  const lines = once.out.trimEnd().split('\n');
  t.equal(lines.length, events.length);
  // The line shows the version the event was written at (synthetic events are current ones).
  const v = CURRENT_VERSION['run.started'];
  t.match(
    lines[0],
    new RegExp(
      `^ +#\\d+ {2}\\d\\d:\\d\\d:\\d\\d\\.\\d{3} {2}run\\.started v${v} +step=0 pv=0 {2}algo=grpo\\+akbe`,
    ),
  );

  const live = syntheticRunEvents({ runId: 'cli-live', steps: 1 });
  const tail = runCli('events', 'tail', '--run', 'cli-live', '--nats', url);
  await new Promise((r) => setTimeout(r, 300));
  await store.appendMany(live.slice(0, 5));
  await new Promise((r) => setTimeout(r, 200));
  await store.appendMany(live.slice(5));
  const r = await tail;
  t.equal(r.code, 0);
  t.equal(r.out.trimEnd().split('\n').length, live.length, 'every live event, then it stops at run.finished');
  t.match(r.out.trimEnd().split('\n').at(-1), /run\.finished v1/);
});

t.test('dead-letters lists bad messages with their reason', async (t) => {
  // A plain core publish on an event subject is stored by the stream too (nobody checked it).
  nats.nc.publish('akbe.cli-bad.evt.rollout.turn', new Uint8Array([0xc1]));
  const { jetstream } = await import('@nats-io/jetstream');
  await jetstream(nats.nc).publish('akbe.cli-bad.evt.rollout.turn', new Uint8Array([0xc1, 0x00]));
  const exp = await runCli('events', 'export', '--run', 'cli-bad', '--nats', url);
  t.equal(exp.code, 0);
  t.match(exp.err, /exported 0 events of run cli-bad; 2 bad messages went to the dead letters/);
  const r = await runCli('events', 'dead-letters', '--run', 'cli-bad', '--nats', url);
  t.equal(r.code, 0);
  t.match(
    r.out,
    /undecodable +akbe\.cli-bad\.evt\.rollout\.turn AKBE_EVENTS#\d+ {2}2 B {2}by replay: not msgpack/,
  );
  const j = await runCli('events', 'dead-letters', '--run', 'cli-bad', '--json', '--nats', url);
  const letters = j.out
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
  t.same(
    letters.map((d) => d.bytes),
    [Buffer.from([0xc1]).toString('base64'), Buffer.from([0xc1, 0x00]).toString('base64')],
  );
});

t.test(
  'connectAkbeNats: embedded server under AKBE_HOME, recorded while open, joined by a second process',
  async (t) => {
    const home = mkdtempSync(join(tmpdir(), 'akbe-home-'));
    t.teardown(() => rmSync(home, { recursive: true, force: true }));
    const first = await connectAkbeNats({ home, env: {}, embedded: true });
    t.equal(first.source, 'embedded');
    t.ok(first.server);
    t.equal(readServerRecord(home)?.pid, first.server!.pid);
    t.ok(existsSync(join(home, 'nats', 'jetstream')), 'JetStream stores under <home>/nats');
    const second = await connectAkbeNats({ home, env: {} });
    t.equal(second.source, 'running');
    t.equal(second.url, first.url);
    await second.close();
    await first.close();
    t.equal(readServerRecord(home), null, 'the record goes with the server');
    t.notOk(isNatsServerAlive(first.server!.pid));
    const viaEnv = await connectAkbeNats({ home, env: { NATS_URL: url } });
    t.equal(viaEnv.source, 'env');
    await viaEnv.close();
    await t.rejects(connectAkbeNats({ url: 'nats://127.0.0.1:1', home }), {
      name: 'NatsConnectError',
      message: /cannot connect to NATS at nats:\/\/127.0.0.1:1 \(flag\)/,
    });
  },
);

t.test(
  'nats up starts a detached server that other akbe processes, status and down find through AKBE_HOME',
  async (t) => {
    const home = mkdtempSync(join(tmpdir(), 'akbe-home-'));
    t.teardown(() => {
      const rec = readServerRecord(home);
      if (rec && isNatsServerAlive(rec.pid)) process.kill(rec.pid, 'SIGKILL');
      rmSync(home, { recursive: true, force: true });
    });
    t.equal((await runCli('nats', 'status', '--home', home)).code, 1, 'status: not running');
    const up = await runCli('nats', 'up', '--home', home);
    t.equal(up.code, 0, up.err);
    const record = readServerRecord(home)!;
    t.equal(record.mode, 'detached');
    t.ok(isNatsServerAlive(record.pid));
    t.match((await runCli('nats', 'up', '--home', home)).out, /already running/);

    // A later akbe process finds the recorded server through AKBE_HOME and writes to its log.
    const joined = await connectAkbeNats({ home, env: {} });
    t.equal(joined.url, record.url, 'joins the recorded server');
    const joinedStore = await EventStore.open(joined.nc);
    await joinedStore.appendMany(syntheticRunEvents({ runId: 'home-run', steps: 1 }));
    const exported = await runCli(
      'events',
      'export',
      '--run',
      'home-run',
      '--format',
      'jsonl',
      '--nats',
      record.url,
    );
    t.equal(exported.code, 0, exported.err);
    t.ok(exported.out.trim().split('\n').length > 5, 'the run written through the recorded server exports');
    await joined.close();
    const status = await runCli('nats', 'status', '--home', home);
    t.equal(status.code, 0);
    t.match(status.out, new RegExp(`running at ${record.url} \\(detached pid ${record.pid}`));
    t.match(status.out, /AKBE_EVENTS +\d+ msgs/);
    t.match(status.out, /AKBE_DEAD_LETTERS/);

    const down = await runCli('nats', 'down', '--home', home);
    t.equal(down.code, 0);
    t.notOk(isNatsServerAlive(record.pid), 'the server process is gone');
    t.equal(readServerRecord(home), null);
    t.match((await runCli('nats', 'down', '--home', home)).out, /not running/);
  },
);
