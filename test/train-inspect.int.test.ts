/**
 * `akbe train --inspect --inspect-port 0` (issue 7 item 3): the CLI starts the inspector relay,
 * prints its URL, connects every machine of the tiny run to it (a plain WebSocket viewer sees the
 * run, question and rollout machines register) and closes the relay when training ends, and also
 * when training fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { WebSocket } from 'ws';
import { main } from '../src/cli/main.js';
import { withNats } from './helpers/nats.js';
import { TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

delete process.env.NATS_URL;
process.env.CI = 'true'; // never open a browser

const fx = await tinyRunFixture();
const nats = await withNats(t);
const dir = mkdtempSync(join(tmpdir(), 'akbe-train-inspect-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function writeConfig(name: string, over: Record<string, unknown>): string {
  const file = join(dir, name);
  const cfg = { ...TINY_TRAIN, world: fx.worldDir, policy: fx.policyDir, topK: 3, evalQuestions: 0, ...over };
  writeFileSync(file, JSON.stringify(cfg));
  return file;
}

/** Runs `akbe <argv>`; `onUrl` gets the relay's ws URL as soon as the CLI prints it. */
async function runCli(argv: string[], onUrl: (wsUrl: string) => void) {
  const out = new PassThrough();
  const err = new PassThrough();
  let o = '';
  let e = '';
  let announced = false;
  out.on('data', (c) => (o += c));
  err.on('data', (c) => {
    e += c;
    const m = /inspector: open \S+ \(.*relay at (ws:\/\/\S+?);/.exec(e);
    if (m && !announced) {
      announced = true;
      onUrl(m[1]);
    }
  });
  const code = await main(argv, out, err);
  return { code, out: o, err: e };
}

function portIsClosed(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

t.test(
  'akbe train --inspect: every machine of the run reaches the relay; it closes at the end',
  async (t) => {
    const seen: Array<{ type: string; sessionId: string; definition?: string }> = [];
    let viewerClosed: Promise<unknown> = Promise.resolve();
    let port = -1;
    const r = await runCli(
      [
        'train',
        '--config',
        writeConfig('tiny.json', {}),
        '--run-id',
        'insp',
        '--inspect',
        '--inspect-port',
        '0',
        '--nats',
        nats.server.url,
        '--home',
        join(dir, 'home'),
        '--concurrency',
        '8',
      ],
      (wsUrl) => {
        port = Number(new URL(wsUrl).port);
        // Registrations are kept by the relay, so a viewer joining now still sees every actor.
        const viewer = new WebSocket(wsUrl);
        viewer.on('message', (d) => seen.push(JSON.parse(String(d))));
        viewerClosed = new Promise((res) => viewer.once('close', res));
      },
    );
    t.equal(r.code, 0, r.err);
    t.match(r.err, /inspector: open http:\/\/127\.0\.0\.1:\d+/, 'the URL is printed on stderr');
    t.not(port, 8080, '--inspect-port 0 picked a free port');
    t.ok(port > 0);
    await viewerClosed; // the relay ended the viewer's connection when training ended
    t.ok(await portIsClosed(port), 'the relay is stopped after training');

    const kind = new Map<string, string>();
    for (const m of seen)
      if (m.type === '@xstate.actor' && m.definition) kind.set(m.sessionId, JSON.parse(m.definition).id);
    const count = (id: string) => [...kind.values()].filter((k) => k === id).length;
    const { steps, batchQuestions, gWithTool, gNoTool } = TINY_TRAIN as Required<typeof TINY_TRAIN>;
    t.equal(count('run'), 1, 'the run machine');
    t.equal(count('learner'), 1, 'the learner machine');
    t.equal(count('question'), steps * batchQuestions, 'one question machine per question per step');
    t.equal(count('rollout'), steps * batchQuestions * (gWithTool + gNoTool), 'every rollout machine');
    for (const id of ['run', 'question', 'rollout'])
      t.ok(
        seen.some((m) => m.type === '@xstate.snapshot' && kind.get(m.sessionId) === id),
        `${id} snapshots`,
      );
  },
);

t.test('the relay is closed when training fails too', async (t) => {
  let port = -1;
  const r = await runCli(
    [
      'train',
      '--config',
      writeConfig('broken.json', { policy: join(dir, 'no-such-policy') }),
      '--run-id',
      'insp-broken',
      '--inspect',
      '--inspect-port',
      '0',
      '--nats',
      nats.server.url,
      '--home',
      join(dir, 'home'),
    ],
    (wsUrl) => {
      port = Number(new URL(wsUrl).port);
    },
  );
  t.not(r.code, 0, 'the run failed');
  t.ok(port > 0, 'the relay had started');
  t.ok(await portIsClosed(port), 'and is stopped after the failure');
});

t.test('--inspect-port without --inspect is a usage error', async (t) => {
  const r = await runCli(
    ['train', '--config', writeConfig('x.json', {}), '--inspect-port', '9000'],
    () => {},
  );
  t.equal(r.code, 2);
  t.match(r.err, /--inspect-port needs --inspect/);
});
