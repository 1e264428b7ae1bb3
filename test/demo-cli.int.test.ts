/**
 * `akbe demo`'s flags take effect, on a home prepared so the demo is fast: `<home>/world` is the
 * tiny world and `<home>/base` the tiny policy (a base there wins over the committed one, and no
 * world is built), so the demo's own run size (DEMO_CONFIG) trains in seconds. `--steps 1` gives
 * one step, `--run` the run id, `--nats` the server its events land on, `--home` where its world,
 * base and checkpoints are, `--inspect --inspect-port 0` a relay on a free port.
 */
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { DEMO_CONFIG } from '../src/cli/commands/demo.js';
import { main } from '../src/cli/main.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture } from './helpers/tiny-run.js';

delete process.env.NATS_URL;
process.env.CI = 'true'; // never open a browser

t.test('akbe demo --steps --run --home --nats --inspect', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const home = mkdtempSync(join(tmpdir(), 'akbe-demo-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  cpSync(fx.worldDir, join(home, 'world'), { recursive: true });
  cpSync(fx.policyDir, join(home, 'base'), { recursive: true });

  const out = new PassThrough();
  const err = new PassThrough();
  let o = '';
  let e = '';
  out.on('data', (c) => (o += c));
  err.on('data', (c) => (e += c));
  const argv = ['demo', '--steps', '1', '--run', 'd1', '--home', home, '--nats', nats.server.url];
  const code = await main([...argv, '--inspect', '--inspect-port', '0'], out, err);
  t.equal(code, 0, e);

  t.notMatch(
    e,
    /building the default world|committed base|pretraining the base/,
    'the home world and base are used',
  );
  t.match(e, /train: NATS at nats:\/\/127\.0\.0\.1:\d+ \(flag\), run d1/, '--nats and --run');
  const relay = /inspector: open http:\/\/127\.0\.0\.1:(\d+)/.exec(e);
  t.ok(relay && relay[1] !== '8080', '--inspect-port 0: a free port');
  const { batchQuestions: B, gWithTool, gNoTool } = DEMO_CONFIG;
  t.match(
    o,
    new RegExp(`^demo: AKBE 1 steps \\(B ${B}, G_wt ${gWithTool}, G_nt ${gNoTool}\\) in \\d+s`, 'm'),
  );
  t.match(
    o,
    /^audit it with: akbe nats up, then akbe replay --run d1 \(or akbe events export --run d1 --out d1\.jsonl\)$/m,
  );
  t.same(
    o
      .split('\n')
      .filter((l) => /^step \d+ v\d+ /.test(l))
      .map((l) => l.split(' ').slice(0, 3).join(' ')),
    ['step 0 v0'],
    '--steps 1: one step',
  );
  // The demo's evaluation (DEMO_CONFIG.evalSplits): one table row per split.
  t.same(
    o
      .split('\n')
      .filter((l) => /^(dev|test) /.test(l))
      .map((l) => l.split(/\s+/)[0]),
    ['dev', 'test'],
  );
  t.ok(
    existsSync(join(home, 'runs', 'd1', 'checkpoints', 'v1', 'model.safetensors')),
    '--home holds the run',
  );

  const store = await EventStore.open(nats.nc);
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay('d1')) events.push(event);
  const started = events.find((ev) => ev.type === 'run.started');
  t.match(
    started?.data,
    {
      worldRef: join(home, 'world'),
      policyRef: join(home, 'base'),
      config: { steps: 1, batchQuestions: B, gWithTool, gNoTool },
    },
    'the run on --nats has the home world and base and --steps',
  );
  t.equal(events.filter((ev) => ev.type === 'run.finished').length, 1);
});
