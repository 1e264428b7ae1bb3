/**
 * A private nats-server (JetStream, temp store dir, free port) plus a connection, torn down with
 * the test. Never touches the server on port 4222.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Test } from 'tap';
import { type LocalNatsServer, startNatsServer } from '../../src/actors/nats-server.js';

export interface TestNats {
  server: LocalNatsServer;
  nc: NatsConnection;
  dir: string;
  /** Stops the server and starts a new one on the same store dir and port; reconnects `nc`. */
  restart(): Promise<void>;
}

export async function withNats(t: Test): Promise<TestNats> {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-events-'));
  const ctx = { dir } as TestNats;
  ctx.server = await startNatsServer({ storeDir: join(dir, 'store') });
  ctx.nc = await connect({ servers: ctx.server.url });
  ctx.restart = async () => {
    await ctx.nc.close();
    const port = ctx.server.port;
    await ctx.server.stop();
    ctx.server = await startNatsServer({ storeDir: join(dir, 'store'), port });
    ctx.nc = await connect({ servers: ctx.server.url });
  };
  t.teardown(async () => {
    await ctx.nc.close().catch(() => undefined);
    await ctx.server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return ctx;
}
