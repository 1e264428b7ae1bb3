/**
 * The 3-node JetStream cluster of infra/nats/cluster, started from its own config files on free
 * ports in a temp dir, with credentials as akbe sets them up (auth.conf from `ensureNatsAuth`).
 *
 * The temp dir mirrors the repository layout the configs expect: `infra/nats/cluster/node-<i>.conf`
 * includes `../../../.akbe/nats/auth/auth.conf`, presents `.akbe/nats/tls/server.pem` (the home CA's,
 * clients and routes on TLS), and each node stores under `.akbe/nats-cluster/n<i>` relative to its
 * working directory (the temp dir). Only the ports are
 * rewritten; monitoring is dropped (it is not needed and would take three more ports).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection, nkeyAuthenticator } from '@nats-io/transport-node';
import type { Test } from 'tap';
import { ensureNatsAuth, natsCredentials } from '../../src/actors/nats/nats-auth.js';
import { findNatsServerBinary } from '../../src/actors/nats/nats-server.js';
import { ensureNatsTls } from '../../src/actors/nats/nats-tls.js';

export interface ClusterNode {
  name: string;
  url: string;
  process: ChildProcess;
  /** The node's output so far (tail). */
  log(): string;
  /** SIGKILL, and resolves once the process is gone. */
  kill(): Promise<void>;
}

export interface TestCluster {
  dir: string;
  authDir: string;
  /** The CA the nodes' certificate is from (what clients pin: AKBE_NATS_TLS_CA for a CLI child). */
  caFile: string;
  nodes: ClusterNode[];
  /** The client URLs as one comma-separated list (what NATS_URL takes). */
  url: string;
  /** A connection as the orchestrator, to the nodes in the order given (no randomizing). */
  connect(order?: readonly ClusterNode[]): Promise<NatsConnection>;
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** Starts the three nodes and waits until JetStream answers on the cluster (a meta leader exists). */
export async function withNatsCluster(t: Test): Promise<TestCluster> {
  const binary = findNatsServerBinary();
  if (!binary) throw new Error('nats-server not found');
  const dir = mkdtempSync(join(tmpdir(), 'akbe-cluster3-'));
  const authDir = ensureNatsAuth(join(dir, '.akbe/nats/auth'));
  const { caFile } = ensureNatsTls(join(dir, '.akbe/nats/tls'));
  const confDir = join(dir, 'infra/nats/cluster');
  mkdirSync(confDir, { recursive: true });
  const ports = await Promise.all(Array.from({ length: 6 }, freePort));
  const nodes: ClusterNode[] = [];
  t.teardown(async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    if (t.passing()) rmSync(dir, { recursive: true, force: true });
    else process.stderr.write(`cluster dir kept: ${dir}\n`);
  });
  for (let i = 1; i <= 3; i++) {
    let conf = readFileSync(resolve(`infra/nats/cluster/node-${i}.conf`), 'utf8');
    for (let j = 1; j <= 3; j++) {
      conf = conf
        .replaceAll(`127.0.0.1:430${j}`, `127.0.0.1:${ports[j - 1]}`)
        .replaceAll(`127.0.0.1:630${j}`, `127.0.0.1:${ports[j + 2]}`);
    }
    conf = conf.replace(/^http:.*$/m, '');
    writeFileSync(join(confDir, `node-${i}.conf`), conf);
    const child = spawn(binary, ['-c', join(confDir, `node-${i}.conf`)], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const onData = (d: Buffer) => {
      out = (out + d.toString()).slice(-64_000);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    nodes.push({
      name: `akbe-n${i}`,
      url: `nats://127.0.0.1:${ports[i - 1]}`,
      process: child,
      log: () => out,
      kill: async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await exited;
      },
    });
  }
  const seed = natsCredentials('', 'orchestrator', { AKBE_NATS_AUTH_DIR: authDir })!.seed;
  const cluster: TestCluster = {
    dir,
    authDir,
    caFile,
    nodes,
    url: nodes.map((n) => n.url).join(','),
    connect: (order = nodes) =>
      connect({
        servers: order.map((n) => n.url),
        noRandomize: true,
        authenticator: nkeyAuthenticator(seed),
        tls: { caFile },
      }),
  };
  const deadline = Date.now() + 30_000;
  for (const n of nodes) {
    while (!/Server is ready/.test(n.log())) {
      if (n.process.exitCode !== null || Date.now() > deadline)
        throw new Error(`${n.name} did not start: ${n.log().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  // Ready when an R3 stream can be placed: the meta group has a leader (before that, account
  // info times out) and knows all three peers (before that: "no suitable peers for placement").
  const nc = await cluster.connect();
  try {
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.add({ name: 'READY_PROBE', subjects: ['ready.probe'], num_replicas: 3 });
        await jsm.streams.delete('READY_PROBE');
        break;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`JetStream cluster not ready: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  } finally {
    await nc.close();
  }
  return cluster;
}
