/**
 * What TLS costs a NATS client (issue 23 item 4): the same nats-server config with and without
 * the home CA's certificate, in this process. Per server: connect + first round trip + close
 * (what each short akbe command and each test's connection pays), and request/reply round trips
 * on an open connection (what a run pays per message). Printed: medians and the TLS / plain
 * ratio.
 *
 *   npm run build && node dist/bench/nats-tls.js [--connects 40] [--requests 2000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connectLocal } from '../src/actors/nats/connection.js';
import { type LocalNatsServer, startNatsServer } from '../src/actors/nats/nats-server.js';

const { values } = parseArgs({
  options: { connects: { type: 'string', default: '40' }, requests: { type: 'string', default: '2000' } },
});
const connects = Number(values.connects);
const requests = Number(values.requests);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(server: LocalNatsServer): Promise<{ connectMs: number; rttUs: number }> {
  const times: number[] = [];
  for (let i = 0; i < connects; i++) {
    const t0 = performance.now();
    const nc = await connectLocal(server);
    await nc.flush();
    await nc.close();
    times.push(performance.now() - t0);
  }
  const nc = await connectLocal(server);
  const sub = nc.subscribe('bench.echo', {
    callback: (_e, m) => {
      m.respond(m.data);
    },
  });
  const payload = new Uint8Array(256);
  const rtts: number[] = [];
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now();
    await nc.request('bench.echo', payload);
    rtts.push((performance.now() - t0) * 1000);
  }
  sub.unsubscribe();
  await nc.close();
  return { connectMs: median(times), rttUs: median(rtts) };
}

const dir = mkdtempSync(join(tmpdir(), 'akbe-bench-tls-'));
try {
  const auth = join(dir, 'auth');
  const plain = await startNatsServer({ storeDir: join(dir, 'plain'), auth, tls: false });
  const tls = await startNatsServer({ storeDir: join(dir, 'tls'), auth, tls: join(dir, 'ca') });
  // Alternating rounds, so load that changes during the run falls on both.
  const rounds: Record<'plain' | 'tls', { connectMs: number; rttUs: number }[]> = { plain: [], tls: [] };
  for (let r = 0; r < 3; r++) {
    rounds.plain.push(await measure(plain));
    rounds.tls.push(await measure(tls));
  }
  await plain.stop();
  await tls.stop();
  const m = (k: 'plain' | 'tls', f: 'connectMs' | 'rttUs') => median(rounds[k].map((x) => x[f]));
  console.log(
    `load average ${loadavg()[0].toFixed(1)}; ${connects} connects and ${requests} requests x 3 rounds`,
  );
  console.log(
    `connect+flush+close  plain ${m('plain', 'connectMs').toFixed(2)} ms  tls ${m('tls', 'connectMs').toFixed(2)} ms  ratio ${(m('tls', 'connectMs') / m('plain', 'connectMs')).toFixed(2)}`,
  );
  console.log(
    `request round trip   plain ${m('plain', 'rttUs').toFixed(0)} us  tls ${m('tls', 'rttUs').toFixed(0)} us  ratio ${(m('tls', 'rttUs') / m('plain', 'rttUs')).toFixed(2)}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
