/**
 * How akbe finds its NATS server, in order:
 * 1. an explicit URL (`--nats URL`) or `NATS_URL`: connect there;
 * 2. a server started by `akbe nats up` (or a run's embedded server), recorded in
 *    `<home>/nats/server.json` (home = `AKBE_HOME` or `../.akbe`), if its process is alive;
 * 3. otherwise, for a run only (`embedded: true`: `akbe train`, `akbe demo`, `akbe experiment
 *    run`), an embedded nats-server child process with JetStream stored under `<home>/nats`,
 *    stopped when the connection is closed (or this process exits). It records itself in
 *    server.json so that a second akbe process (e.g. `akbe events tail` beside a training run)
 *    joins it instead of starting a second server on the same store directory. Every other
 *    command fails with NoNatsServerError. A run joins a recorded server only if it stays
 *    (server-choice.ts says why).
 *
 *
 * Every server akbe starts requires credentials (src/actors/nats/nats-auth.ts). A client presents the
 * nkey of its role (`role`, default orchestrator): `AKBE_NATS_CREDS` (a seed file), else
 * `<auth dir>/<role>.nk` (auth dir: `AKBE_NATS_AUTH_DIR` or `<home>/nats/auth`). Every server akbe
 * starts uses TLS with a certificate from the home CA, and every client pins a CA (nats-trust.ts):
 * a server that cannot prove itself is refused in one line. `AKBE_NATS_TLS_CERT`/`AKBE_NATS_TLS_KEY`
 * add a client certificate (docs/security.md).
 *
 *   await using nats = await connectAkbeNats();
 *   const store = await EventStore.open(nats.nc);
 */
import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import {
  type ConnectionOptions,
  connect,
  type NatsConnection,
  nkeyAuthenticator,
} from '@nats-io/transport-node';
import { type NatsCredentials, type NatsRole, natsAuthDir, natsCredentials } from './nats-auth.js';
import { type LocalNatsServer, startNatsServer } from './nats-server.js';
import { isTlsRefusal, type NatsTrust, natsTrust, tlsRefusalMessage, warnInsecure } from './nats-trust.js';
import {
  claimServerStart,
  NatsServerNotSharedError,
  NoNatsServerError,
  runMayJoin,
} from './server-choice.js';
import {
  akbeHome,
  liveServerRecord,
  localServerAuthDir,
  natsDir,
  removeServerRecord,
  writeServerRecord,
} from './server-record.js';

export { NatsServerNotSharedError, NoNatsServerError } from './server-choice.js';
// Where akbe finds its server is part of connecting; its callers import these from here.
export {
  akbeHome,
  isNatsServerAlive,
  liveServerRecord,
  localServerAuthDir,
  natsDir,
  readServerRecord,
  removeServerRecord,
  type ServerRecord,
  writeServerRecord,
} from './server-record.js';

export class NatsConnectError extends Error {
  constructor(
    readonly url: string,
    readonly source: NatsSource,
    opts?: ErrorOptions,
    readonly credentials: NatsCredentials | null = null,
    readonly trust: NatsTrust | null = null,
  ) {
    const hint =
      source === 'env'
        ? 'check NATS_URL or unset it to use a local server'
        : source === 'flag'
          ? 'check --nats'
          : 'run akbe nats down && akbe nats up';
    const reason = (opts?.cause as Error | undefined)?.message ?? 'unknown error';
    const auth = /authorization|authentication|auth/i.test(reason)
      ? credentials
        ? `; the server refused the ${credentials.role} key ${credentials.path}`
        : "; no credentials: set AKBE_NATS_CREDS to a seed file or AKBE_NATS_AUTH_DIR to the server's auth dir (akbe nats auth)"
      : '';
    super(
      trust?.tls === 'ca' && isTlsRefusal(reason)
        ? tlsRefusalMessage(url, source, trust.caFile, reason)
        : `cannot connect to NATS at ${url} (${source}): ${reason}${auth}; ${hint}`,
      opts,
    );
    this.name = 'NatsConnectError';
  }
}

/** The NATS server went away under a running command; `hint` says how to carry on. */
export class NatsLostError extends Error {
  constructor(
    readonly url: string,
    readonly detail: string,
    hint: string,
    opts?: ErrorOptions,
  ) {
    super(`lost the NATS server at ${url} (${detail}); ${hint}`, opts);
    this.name = 'NatsLostError';
  }
}

export type NatsSource = 'flag' | 'env' | 'running' | 'embedded';
export interface AkbeNats extends AsyncDisposable {
  nc: NatsConnection;
  /** JetStream over `nc` (work queues, KV, object store). */
  js: JetStreamClient;
  /** Why the server was lost (not closed by us), or null while it is fine. */
  lost(): string | null;
  url: string;
  source: NatsSource;
  /** The embedded server this handle owns (stopped by close), when it started one. */
  server?: LocalNatsServer;
  /** Drains the connection and stops an owned embedded server. */
  close(): Promise<void>;
  /**
   * The credentials this connection presented, null when anonymous. A run's orchestrator signs
   * its train requests with this seed (events/train-signature.ts).
   */
  credentials?: NatsCredentials | null;
  /** Which servers this connection believed: a pinned CA, or none (--nats-insecure). */
  trust?: NatsTrust;
}

export interface ConnectAkbeOptions {
  /** Explicit server URL; wins over NATS_URL. */
  url?: string;
  env?: NodeJS.ProcessEnv;
  /** Project data dir; default AKBE_HOME or ./.akbe. */
  home?: string;
  /** Connection name shown by the server. */
  name?: string;
  /**
   * This process is a run: it may start an embedded server when none runs, and joins a recorded
   * one only if it stays (server-choice.ts). Default false: attach to a running server or fail.
   */
  embedded?: boolean;
  /** Whose credentials to present (default orchestrator; a dashboard uses viewer). */
  role?: NatsRole;
  /** Keep reconnecting forever (long-lived viewers such as `akbe dashboard`); default: the client's 10 tries. */
  reconnectForever?: boolean;
}

/**
 * Credentials and TLS for a client of role `role` (see the header). Credentials come from
 * AKBE_NATS_CREDS, AKBE_NATS_AUTH_DIR, the registered auth dir of the local server at `url`, then
 * `<home>/nats/auth`.
 */
export function natsClientOptions(
  home: string,
  role: NatsRole,
  env: NodeJS.ProcessEnv = process.env,
  url?: string,
  /** `url` is this home's own server (recorded or embedded): its CA, whatever AKBE_NATS_TLS_CA says. */
  own = false,
): { credentials: NatsCredentials | null; options: Partial<ConnectionOptions>; trust: NatsTrust } {
  const registered = url && !env.AKBE_NATS_CREDS && !env.AKBE_NATS_AUTH_DIR ? localServerAuthDir(url) : null;
  const credentials = natsCredentials(
    home,
    role,
    registered ? { ...env, AKBE_NATS_AUTH_DIR: registered } : env,
  );
  const options: Partial<ConnectionOptions> = {};
  if (credentials) options.authenticator = nkeyAuthenticator(credentials.seed);
  const trust = natsTrust(home, own ? { ...env, AKBE_NATS_TLS_CA: undefined } : env, url);
  const clientCert = {
    ...(env.AKBE_NATS_TLS_CERT ? { certFile: env.AKBE_NATS_TLS_CERT } : {}),
    ...(env.AKBE_NATS_TLS_KEY ? { keyFile: env.AKBE_NATS_TLS_KEY } : {}),
  };
  // A `tls` option makes nats.js refuse a server that offers no TLS ("server does not support
  // 'tls'") and verify the certificate against the pinned CA only.
  if (trust.tls === 'ca') options.tls = { caFile: trust.caFile, ...clientCert };
  return { credentials, options, trust };
}

async function tryConnect(
  url: string,
  source: NatsSource,
  name: string,
  client: ReturnType<typeof natsClientOptions>,
): Promise<NatsConnection> {
  try {
    // A cluster is given as a comma-separated list (NATS_URL=nats://a:4301,nats://b:4302).
    const servers = url
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    return await connect({ servers, name, timeout: 5_000, ...client.options });
  } catch (err) {
    throw new NatsConnectError(url, source, { cause: err }, client.credentials, client.trust);
  }
}

export async function connectAkbeNats(opts: ConnectAkbeOptions = {}): Promise<AkbeNats> {
  const presented: Presented = { credentials: null };
  const nats = await connectAs(opts, presented);
  nats.credentials = presented.credentials;
  nats.trust = presented.trust;
  return nats;
}

interface Presented {
  credentials: NatsCredentials | null;
  trust?: NatsTrust;
}

async function connectAs(opts: ConnectAkbeOptions, presented: Presented): Promise<AkbeNats> {
  const env = opts.env ?? process.env;
  const name = opts.name ?? `akbe-${process.pid}`;
  const home = opts.home ?? akbeHome(env);
  const client = (url: string, own = false) => {
    const c = natsClientOptions(home, opts.role ?? 'orchestrator', env, url, own);
    presented.credentials = c.credentials;
    presented.trust = c.trust;
    if (c.trust.tls === 'insecure') warnInsecure(url);
    if (opts.reconnectForever) c.options.maxReconnectAttempts = -1;
    return c;
  };
  const explicit = opts.url
    ? { url: opts.url, source: 'flag' as const }
    : env.NATS_URL
      ? { url: env.NATS_URL, source: 'env' as const }
      : null;
  if (explicit)
    return akbeNatsHandle(
      await tryConnect(explicit.url, explicit.source, name, client(explicit.url)),
      explicit.url,
      explicit.source,
    );

  // Claimed only by a run that will start the server; re-read after the claim (see claimServerStart).
  let release: (() => void) | undefined;
  try {
    for (;;) {
      const running = liveServerRecord(home);
      if (running) {
        if (opts.embedded && !runMayJoin(running)) throw new NatsServerNotSharedError(home, running);
        return akbeNatsHandle(
          await tryConnect(running.url, 'running', name, client(running.url, true)),
          running.url,
          'running',
        );
      }
      if (!opts.embedded) throw new NoNatsServerError(home);
      if (release) return await startEmbedded(home, env, name, client);
      release = await claimServerStart(home);
    }
  } finally {
    release?.();
  }
}

/** Starts this home's embedded server (the caller holds the start claim), records it, connects. */
async function startEmbedded(
  home: string,
  env: NodeJS.ProcessEnv,
  name: string,
  client: (url: string, own?: boolean) => ReturnType<typeof natsClientOptions>,
): Promise<AkbeNats> {
  const storeDir = natsDir(home);
  const server = await startNatsServer({ storeDir, auth: natsAuthDir(home, env) });
  writeServerRecord(home, {
    pid: server.pid,
    port: server.port,
    url: server.url,
    storeDir,
    mode: 'embedded',
    ownerPid: process.pid,
    startedAt: new Date().toISOString(),
  });
  try {
    const nc = await tryConnect(server.url, 'embedded', name, client(server.url, true));
    return akbeNatsHandle(nc, server.url, 'embedded', server, () => removeServerRecord(home, server.pid));
  } catch (err) {
    await server.stop();
    removeServerRecord(home, server.pid);
    throw err;
  }
}

/**
 * The handle over a connection: `lost()` says why the server went away (an owned server that
 * exits, or the client giving up its reconnects); `close()` drains and stops an owned server.
 */
function akbeNatsHandle(
  nc: NatsConnection,
  url: string,
  source: NatsSource,
  server?: LocalNatsServer,
  onClose?: () => void,
): AkbeNats {
  let closing: Promise<void> | undefined;
  let lost: string | null = null;
  // An owned server that dies (kill -9, OOM) is gone for good: fail in-flight work at once
  // rather than after the client's reconnect attempts (~20 s).
  server?.process.once('exit', (code, signal) => {
    if (closing) return;
    lost = `embedded nats-server pid ${server.pid} exited (${signal ?? `code ${code}`})`;
    void nc.close().catch(() => undefined);
  });
  void nc.closed().then((err) => {
    if (!closing && !lost)
      lost = `connection closed${err ? `: ${err.message}` : ' after reconnect attempts'}`;
  });
  const close = () => {
    closing ??= (async () => {
      await nc.drain().catch(() => nc.close());
      if (server) {
        // Unrecorded first: a client starting now must not find a server that is stopping.
        onClose?.();
        await server.stop();
      }
    })();
    return closing;
  };
  return {
    nc,
    js: jetstream(nc),
    url,
    source,
    server,
    lost: () => lost,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** A connection to a server started with `startNatsServer`, as `role` (tests, benchmarks). */
export async function connectLocal(
  server: LocalNatsServer,
  role: NatsRole = 'orchestrator',
  opts: Partial<ConnectionOptions> = {},
): Promise<NatsConnection> {
  const auth = server.authDir
    ? {
        authenticator: nkeyAuthenticator(
          natsCredentials('', role, { AKBE_NATS_AUTH_DIR: server.authDir })!.seed,
        ),
      }
    : {};
  const tls = server.caFile ? { tls: { caFile: server.caFile } } : {};
  return connect({ servers: server.url, ...auth, ...tls, ...opts });
}
