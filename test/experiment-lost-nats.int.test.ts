/**
 * `akbe experiment run` on a NATS server that goes away (session 4, found and left open): a
 * runner that joined another akbe process's embedded server loses it when that process exits,
 * and then failed every remaining run at once with the stale URL, one line each. Now the grid
 * stops at the first run that cannot reach the server, in one line naming the URL, whose server
 * it was and `akbe nats up`, and counts the runs left as not completed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { startNatsServer } from '../src/actors/nats/nats-server.js';
import { runGrid } from '../src/cli/commands/experiment-run.js';
import { EventStore } from '../src/events/store.js';
import { parseSpec, planRuns } from '../src/experiments/spec.js';
import { withNats } from './helpers/nats.js';

t.test('a lost NATS server stops the grid in one line instead of failing every run', async (t) => {
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-grid-lost-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  // The other process's server: started, then gone (its process exited), its URL now stale.
  const gone = await startNatsServer({ storeDir: join(home, 'gone'), auth: nats.authDir });
  await gone.stop();
  const spec = await parseSpec(
    'name: lost\nbase: configs/tiny.yaml\nseeds: [1, 2]\ngrid:\n  - algo: grpo\n  - algo: akbe\n',
    'lost.yaml',
  );
  const runs = planRuns(spec);
  t.equal(runs.length, 4);
  const err = new PassThrough();
  let text = '';
  err.on('data', (d) => {
    text += String(d);
  });
  const t0 = Date.now();
  const notDone = await runGrid({
    spec,
    runs,
    store,
    natsUrl: gone.url,
    natsOwner: 'the embedded server of akbe process 4242',
    home,
    concurrency: 1,
    threads: 1,
    device: 'cpu',
    err,
  });
  t.equal(notDone, 4, 'no run completed: all four are counted');
  const lines = text.split('\n').filter((l) => l.startsWith('experiment: '));
  t.equal(lines.filter((l) => / failed: /.test(l)).length, 0, `no per-run failure lines:\n${text}`);
  const stops = lines.filter((l) => l.startsWith('experiment: stopped'));
  t.equal(stops.length, 1, 'said once');
  t.match(stops[0], `stopped at ${runs[0].runId}: lost the NATS server at ${gone.url} (`);
  t.match(stops[0], /, the embedded server of akbe process 4242; use akbe nats up for a server that several/);
  t.match(
    stops[0],
    /run this command again: finished runs are skipped, unfinished ones resume \(4 of 4 runs left/,
  );
  t.equal(
    lines.filter((l) => /^experiment: (starting|resuming) /.test(l)).length,
    1,
    'only the first run was tried',
  );
  t.ok(Date.now() - t0 < 10_000, `stopped in ${Date.now() - t0} ms`);
});
