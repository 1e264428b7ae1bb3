import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ensureNatsAuth } from '../src/actors/nats/nats-auth.js';
import { findNatsServerBinary } from '../src/actors/nats/nats-server.js';
import { ensureNatsTls, natsTlsDir } from '../src/actors/nats/nats-tls.js';

const binary = findNatsServerBinary();
const nodes = [1, 2, 3].map((i) => `infra/nats/cluster/node-${i}.conf`);

t.test(
  'nats-server accepts every shipped config',
  { skip: binary ? false : 'nats-server not installed' },
  async (t) => {
    // A copy of the repository's infra beside a home with no credentials yet.
    const root = mkdtempSync(join(tmpdir(), 'akbe-infra-'));
    t.teardown(() => rmSync(root, { recursive: true, force: true }));
    cpSync('infra', join(root, 'infra'), { recursive: true });
    // From the copy's root, as the infra README runs them: the certificate paths are relative to it.
    const check = (file: string) =>
      spawnSync(binary!, ['-t', '-c', join(root, file)], { encoding: 'utf8', cwd: root });
    for (const file of ['infra/nats/nats-server.conf', ...nodes]) {
      const r = check(file);
      t.not(r.status, 0, `${file} refuses to start without the generated credentials`);
      t.match(`${r.stdout}${r.stderr}`, /auth\.conf/, file);
    }
    // What `akbe nats auth` writes: the credentials and the home CA's server certificate.
    ensureNatsAuth(join(root, '.akbe', 'nats', 'auth'));
    ensureNatsTls(natsTlsDir(join(root, '.akbe')));
    for (const file of ['infra/nats/nats-server.conf', ...nodes]) {
      const r = check(file);
      t.equal(r.status, 0, `${file}: ${r.stderr}`);
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
