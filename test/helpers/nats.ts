/**
 * A private nats-server (JetStream, temp store dir, free port, credentials required) plus a
 * connection as the orchestrator, torn down with the test. Never touches the server on port 4222.
 * akbe clients given its URL (the CLI children a test starts) find its seeds through the local
 * server registry (src/actors/nats/nats-server.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Test } from 'tap';
import { connectLocal } from '../../src/actors/nats/connection.js';
import { ensureNatsAuth, type NatsRole } from '../../src/actors/nats/nats-auth.js';
import { type LocalNatsServer, startNatsServer } from '../../src/actors/nats/nats-server.js';

export interface TestNats {
  server: LocalNatsServer;
  nc: NatsConnection;
  dir: string;
  /** The auth dir the server trusts (`<role>.nk` seeds). */
  authDir: string;
  /** A new connection as `role` (closed with the test). */
  connectAs(role: NatsRole): Promise<NatsConnection>;
  /** Stops the server and starts a new one on the same store dir and port; reconnects `nc`. */
  restart(): Promise<void>;
}

export async function withNats(t: Test): Promise<TestNats> {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-events-'));
  const authDir = ensureNatsAuth(join(dir, 'auth'));
  const ctx = { dir, authDir } as TestNats;
  const extra: NatsConnection[] = [];
  ctx.connectAs = async (role) => {
    const nc = await connectLocal(ctx.server, role);
    extra.push(nc);
    return nc;
  };
  ctx.server = await startNatsServer({ storeDir: join(dir, 'store'), auth: authDir });
  ctx.nc = await connectLocal(ctx.server);
  ctx.restart = async () => {
    await ctx.nc.close();
    const port = ctx.server.port;
    await ctx.server.stop();
    ctx.server = await startNatsServer({ storeDir: join(dir, 'store'), port, auth: authDir });
    ctx.nc = await connectLocal(ctx.server);
  };
  t.teardown(async () => {
    for (const nc of extra) await nc.close().catch(() => undefined);
    await ctx.nc.close().catch(() => undefined);
    await ctx.server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return ctx;
}
