/**
 * Issue 11 item 1 (TLS): a server with a certificate from a CA of the user's own (made with
 * openssl here; akbe's home CA is test/nats-tls-files.test.ts) and the generated credentials.
 * akbe's connection helper verifies the server against AKBE_NATS_TLS_CA (`--nats-ca`); without
 * it the client pins the home CA and refuses this server.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { connectAkbeNats } from '../src/actors/nats/connection.js';
import { ensureNatsAuth } from '../src/actors/nats/nats-auth.js';
import { startNatsServer } from '../src/actors/nats/nats-server.js';

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A CA, and a server certificate for 127.0.0.1 / localhost signed by it. */
function makeCa(dir: string): void {
  openssl(
    dir,
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca-key.pem',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=akbe test CA',
  );
  openssl(
    dir,
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'server-key.pem',
    '-out',
    'server.csr',
    '-subj',
    '/CN=127.0.0.1',
  );
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl(
    dir,
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'san.ext',
  );
}

t.test('TLS with a local CA: verified with AKBE_NATS_TLS_CA, refused without it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-tls-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  makeCa(dir);
  const authDir = ensureNatsAuth(join(dir, 'auth'));
  // The server config: the generated users (include is relative to this file) plus TLS.
  const conf = join(authDir, 'tls.conf');
  writeFileSync(
    conf,
    `include "auth.conf"\ntls {\n  cert_file: "${join(dir, 'server.pem')}"\n  key_file: "${join(dir, 'server-key.pem')}"\n  timeout: 2\n}\n`,
  );
  const server = await startNatsServer({ storeDir: join(dir, 'store'), auth: false, args: ['-c', conf] });
  t.teardown(() => server.stop());
  const url = `tls://127.0.0.1:${server.port}`;
  const env = { AKBE_NATS_AUTH_DIR: authDir, AKBE_NATS_TLS_CA: join(dir, 'ca.pem') };

  const nats = await connectAkbeNats({ url, env });
  t.ok(nats.nc.info?.tls_required, 'the server requires TLS');
  t.equal(nats.nc.info?.jetstream, true);
  await nats.close();

  await t.rejects(
    connectAkbeNats({ url, env: { AKBE_NATS_AUTH_DIR: authDir } }),
    /cannot connect to NATS .*(self[- ]signed|certificate|unable to verify)/i,
    'an unknown CA is refused',
  );
  await t.rejects(
    connectAkbeNats({ url, env: { ...env, AKBE_NATS_AUTH_DIR: join(dir, 'nowhere') } }),
    /no credentials/,
    'TLS does not replace credentials',
  );
});
