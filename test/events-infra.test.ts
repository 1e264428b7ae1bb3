import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { findNatsServerBinary } from '../src/actors/nats-server.js';

const binary = findNatsServerBinary();
const nodes = [1, 2, 3].map((i) => `infra/nats/cluster/node-${i}.conf`);

t.test(
  'nats-server accepts every shipped config',
  { skip: binary ? false : 'nats-server not installed' },
  async (t) => {
    for (const file of ['infra/nats/nats-server.conf', ...nodes]) {
      const r = spawnSync(binary!, ['-t', '-c', file], { encoding: 'utf8' });
      t.equal(r.status, 0, file);
      t.match(`${r.stdout}${r.stderr}`, /is valid/, file);
    }
  },
);

t.test(
  'the cluster: three nodes, one cluster name, distinct ports, every node routes to all three',
  async (t) => {
    const confs = nodes.map((f) => readFileSync(f, 'utf8'));
    const field = (c: string, re: RegExp) => re.exec(c)?.[1];
    t.same(new Set(confs.map((c) => field(c, /^\s*name: (\S+)/m))), new Set(['akbe']));
    const clientPorts = confs.map((c) => field(c, /^listen: 127\.0\.0\.1:(\d+)/m));
    const routePorts = confs.map((c) => field(c, /cluster \{[^}]*listen: 127\.0\.0\.1:(\d+)/s));
    t.equal(new Set([...clientPorts, ...routePorts]).size, 6, 'six distinct ports');
    for (const c of confs) {
      const routes = [...c.matchAll(/nats-route:\/\/127\.0\.0\.1:(\d+)/g)].map((m) => m[1]);
      t.same(routes.sort(), [...routePorts].sort(), 'routes name every node');
      t.match(c, /jetstream \{[^}]*store_dir/s);
    }
    t.equal(new Set(confs.map((c) => field(c, /store_dir: "([^"]+)"/))).size, 3, 'each node its own store');
  },
);
