/**
 * Which servers an akbe client believes: one whose certificate comes from a pinned CA, never
 * whatever answers on the URL (another local user can listen on 127.0.0.1:4222 first, fill a
 * server with a tampered copy of a run and have `akbe events export` seal it). The CA, in order:
 * 1. `--nats-ca FILE` / `AKBE_NATS_TLS_CA` (a CA elsewhere: a cluster across machines);
 * 2. the CA of the akbe-started server registered for a loopback URL's port (this user's own
 *    0700 registry, nats-server.ts), so a client given `--nats nats://127.0.0.1:PORT` of a test's
 *    or another home's server believes that server;
 * 3. the home CA, `<home>/nats/tls/ca.pem` (created on first use, nats-tls.ts).
 * `--nats-insecure` / `AKBE_NATS_INSECURE=1` connects without TLS to a plain server, with a loud
 * warning; run.started records which (`natsTrust`).
 */
import { existsSync } from 'node:fs';
import { ensureNatsTls, natsTlsDir, readCaCertificate } from './nats-tls.js';
import { localServerEntry } from './server-record.js';

export type NatsTrust =
  | { tls: 'ca'; caFile: string; caSource: 'env' | 'server' | 'home'; caSha256: string }
  | { tls: 'insecure' };

export class NatsTrustError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NatsTrustError';
  }
}

export function insecureRequested(env: NodeJS.ProcessEnv): boolean {
  return env.AKBE_NATS_INSECURE === '1' || env.AKBE_NATS_INSECURE === 'true';
}

/** The trust a client of `home` uses for `url` (see the header). */
export function natsTrust(home: string, env: NodeJS.ProcessEnv, url?: string): NatsTrust {
  if (insecureRequested(env)) return { tls: 'insecure' };
  const registered = url ? localServerEntry(url)?.caFile : undefined;
  const [caFile, caSource] = env.AKBE_NATS_TLS_CA
    ? [env.AKBE_NATS_TLS_CA, 'env' as const]
    : registered && existsSync(registered)
      ? [registered, 'server' as const]
      : [ensureNatsTls(natsTlsDir(home)).caFile, 'home' as const];
  let caSha256: string;
  try {
    caSha256 = readCaCertificate(caFile).fingerprint256.replaceAll(':', '').toLowerCase();
  } catch (err) {
    throw new NatsTrustError(
      `cannot read the NATS CA ${caFile} (${caSource === 'env' ? '--nats-ca / AKBE_NATS_TLS_CA' : caSource}): ${(err as Error).message}`,
    );
  }
  return { tls: 'ca', caFile, caSource, caSha256 };
}

/** What run.started records of a connection's trust (no local path: the CA's sha256 and where it came from). */
export function trustRecord(trust: NatsTrust): { [key: string]: string } {
  return trust.tls === 'ca'
    ? { tls: 'ca', caSource: trust.caSource, caSha256: trust.caSha256 }
    : { tls: 'insecure' };
}

const warned = new Set<string>();

/** Says once per URL and process, on stderr, that a connection believes whatever answers on `url`. */
export function warnInsecure(url: string, err: NodeJS.WritableStream = process.stderr): void {
  if (warned.has(url)) return;
  warned.add(url);
  err.write(
    `akbe: WARNING: --nats-insecure: connecting to ${url} without TLS; any server listening there (another user's, a tampered copy of a run) is believed, and run.started records it\n`,
  );
}

/** True when a connect failure is the TLS check refusing the server (not auth, not a dead port). */
export function isTlsRefusal(reason: string): boolean {
  return /does not support 'tls'|certificate|self[- ]signed|unable to verify|unable to get|SSL|TLS|ERR_TLS|hostname\/IP does not match|altnames/i.test(
    reason,
  );
}

/** The one line for a server that did not prove itself with a certificate from the pinned CA. */
export function tlsRefusalMessage(url: string, source: string, caFile: string, reason: string): string {
  return (
    `cannot connect to NATS at ${url} (${source}): the server did not prove itself with a certificate from the CA ${caFile} (${reason}); ` +
    'not a server akbe started from this home? pass its CA with --nats-ca FILE, or --nats-insecure for a plain server (docs/security.md)'
  );
}
