/**
 * The home CA: every server akbe starts proves itself with a certificate from a CA generated
 * under the home, and every akbe client pins that CA (docs/security.md, "TLS").
 *
 *   <home>/nats/tls/ca.pem           the CA certificate (what clients pin; safe to copy)
 *   <home>/nats/tls/ca-key.pem       the CA's private key (P-256), 0600: never leaves the home
 *   <home>/nats/tls/server.pem       the servers' certificate, signed by the CA
 *   <home>/nats/tls/server-key.pem   its private key, 0600
 *
 * Created on first use, without a prompt; the folder is 0700. The server certificate names
 * 127.0.0.1, localhost and ::1, plus `AKBE_NATS_TLS_HOSTS` (comma-separated) and the hosts a
 * caller passes (`akbe nats auth --tls-host`); a host it lacks is added by issuing a new server
 * certificate from the same CA (clients pin the CA, so nothing else changes). A server
 * certificate within 30 days of its end, or not from the current CA, is issued again too.
 */
import { createPrivateKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { ipBytes, issueCertificate } from '../../util/x509.js';

export const DEFAULT_TLS_HOSTS = ['127.0.0.1', 'localhost', '::1'] as const;

const DAY_MS = 86_400_000;
const CA_DAYS = 3650;
const SERVER_DAYS = 825;
const RENEW_BEFORE_DAYS = 30;

export interface NatsTlsFiles {
  dir: string;
  caFile: string;
  caKeyFile: string;
  certFile: string;
  keyFile: string;
}

export function natsTlsDir(home: string): string {
  return join(home, 'nats', 'tls');
}

export function natsTlsFiles(dir: string): NatsTlsFiles {
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    caKeyFile: join(dir, 'ca-key.pem'),
    certFile: join(dir, 'server.pem'),
    keyFile: join(dir, 'server-key.pem'),
  };
}

/** The hosts a server certificate must name: the loopback ones, AKBE_NATS_TLS_HOSTS, `extra`. */
export function tlsHosts(env: NodeJS.ProcessEnv = process.env, extra: readonly string[] = []): string[] {
  const fromEnv = (env.AKBE_NATS_TLS_HOSTS ?? '').split(',');
  return [...new Set([...DEFAULT_TLS_HOSTS, ...fromEnv, ...extra].map((h) => h.trim()).filter(Boolean))];
}

/** Written whole or not at all (a reader never sees half a key), mode 0600. */
function writePrivate(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

function newKeyPair() {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' });
}

/** A host's comparable form: IP literals by their bytes, names lower-cased. */
function hostKey(h: string): string {
  return isIP(h) ? `ip:${ipBytes(h).toString('hex')}` : `dns:${h.toLowerCase()}`;
}

/** The DNS names and IP addresses of a certificate's subjectAltName (Node's text form). */
export function certificateHosts(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '')
    .split(', ')
    .map((entry) => /^(?:DNS:|IP Address:)(.+)$/.exec(entry)?.[1])
    .filter((h): h is string => h !== undefined);
}

function issueServer(files: NatsTlsFiles, hosts: readonly string[]): void {
  const caCert = new X509Certificate(readFileSync(files.caFile));
  const caKey = createPrivateKey(readFileSync(files.caKeyFile));
  const { publicKey, privateKey } = newKeyPair();
  const now = Date.now();
  const pem = issueCertificate({
    subject: { cn: 'akbe nats-server', o: 'akbe' },
    issuer: { cn: 'akbe home CA', o: 'akbe' },
    publicKey,
    issuerKey: caKey,
    issuerPublicKey: caCert.publicKey,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + SERVER_DAYS * DAY_MS),
    hosts,
  });
  writePrivate(files.keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
  writePrivate(files.certFile, pem);
}

function issueCa(files: NatsTlsFiles): void {
  const { publicKey, privateKey } = newKeyPair();
  const now = Date.now();
  const dn = { cn: 'akbe home CA', o: 'akbe' };
  const pem = issueCertificate({
    subject: dn,
    publicKey,
    issuerKey: privateKey,
    issuerPublicKey: publicKey,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + CA_DAYS * DAY_MS),
    ca: true,
  });
  writePrivate(files.caKeyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
  writePrivate(files.caFile, pem);
}

/** Why the server certificate must be issued again, or null when it serves `hosts` as it is. */
function staleServer(files: NatsTlsFiles, hosts: readonly string[]): string | null {
  if (!existsSync(files.certFile) || !existsSync(files.keyFile)) return 'missing';
  const cert = new X509Certificate(readFileSync(files.certFile));
  const ca = new X509Certificate(readFileSync(files.caFile));
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return 'not from this CA';
  if (Date.parse(cert.validTo) - Date.now() < RENEW_BEFORE_DAYS * DAY_MS) return 'expiring';
  const have = new Set(certificateHosts(cert).map(hostKey));
  return hosts.some((h) => !have.has(hostKey(h))) ? 'hosts' : null;
}

/**
 * The TLS files under `dir` (created when missing, see the header), the server certificate
 * naming every host of `hosts` (the ones it named before are kept).
 */
export function ensureNatsTls(dir: string, hosts: readonly string[] = tlsHosts()): NatsTlsFiles {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const files = natsTlsFiles(dir);
  const ready = () => existsSync(files.caFile) && existsSync(files.caKeyFile) && !staleServer(files, hosts);
  if (ready()) return files;
  // Two processes of one home starting at once (two runs, a run and a CLI child) must not each
  // make a CA, or pair one's server key with the other's certificate: issue under a lock.
  withLock(join(dir, '.lock'), () => {
    if (!existsSync(files.caFile) || !existsSync(files.caKeyFile)) issueCa(files);
    const stale = staleServer(files, hosts);
    if (!stale) return;
    const before =
      stale === 'hosts' ? certificateHosts(new X509Certificate(readFileSync(files.certFile))) : [];
    const all = new Map([...before, ...hosts].map((h) => [hostKey(h), h]));
    issueServer(files, [...all.values()]);
  });
  return files;
}

const LOCK_STALE_MS = 30_000;

/** Runs `fn` holding an exclusive lock file (a holder that died 30 s ago no longer holds it). */
function withLock(path: string, fn: () => void): void {
  const deadline = Date.now() + 2 * LOCK_STALE_MS;
  for (;;) {
    try {
      closeSync(openSync(path, 'wx', 0o600));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = Date.now() - (statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > LOCK_STALE_MS) rmSync(path, { force: true });
      else if (Date.now() > deadline)
        throw new Error(`${path} is held by another akbe process; remove it if none runs`);
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
  try {
    fn();
  } finally {
    rmSync(path, { force: true });
  }
}

/** A CA file, parsed (a clear error before any connection when it is not a certificate). */
export function readCaCertificate(path: string): X509Certificate {
  return new X509Certificate(readFileSync(path));
}
