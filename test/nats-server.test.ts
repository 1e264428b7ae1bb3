import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { connectLocal } from '../src/actors/nats/connection.js';
import {
  findNatsServerBinary,
  NatsServerMissingError,
  startNatsServer,
} from '../src/actors/nats/nats-server.js';

t.test('starts a private JetStream server on a free port and stops it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-nats-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const server = await startNatsServer({ storeDir: dir });
  t.ok(server.port > 0);
  const nc = await connectLocal(server);
  const info = nc.info!;
  t.equal(info.jetstream, true, 'JetStream is enabled');
  await nc.close();
  await server.stop();
  t.not(server.process.exitCode ?? server.process.signalCode, null, 'process has exited');
});

t.test('a missing binary is reported with the install command', async (t) => {
  t.equal(findNatsServerBinary({ PATH: '/nonexistent' }, []), null);
  t.match(new NatsServerMissingError().message, /apt-get install -y nats-server/);
  const dir = mkdtempSync(join(tmpdir(), 'akbe-nats-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  await t.rejects(startNatsServer({ storeDir: dir, binary: '/nonexistent/nats-server' }), {
    name: 'NatsServerStartError',
  });
});
