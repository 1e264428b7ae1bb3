/**
 * Issue 23 item 4: the home CA and the servers' certificate that akbe issues itself
 * (src/util/x509.ts, src/actors/nats/nats-tls.ts), checked by two independent readers: Node's
 * X509Certificate and, where installed, openssl (`x509 -text`, `verify`). Plus the DER encoder's
 * pieces against hand-encoded bytes (X.690).
 */
import { execFileSync, spawn } from 'node:child_process';
import { createPrivateKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { certificateHosts, ensureNatsTls, natsTlsFiles, tlsHosts } from '../src/actors/nats/nats-tls.js';
import { der, derNamedBits, derOid, derTime, derUInt, ipBytes, issueCertificate } from '../src/util/x509.js';
import { tsLoaderArgs } from './helpers/cli-process.js';

const hex = (b: Buffer) => b.toString('hex');

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

t.test('DER pieces, hand-encoded', async (t) => {
  t.equal(hex(der(0x04, Buffer.alloc(3))), '0403000000', 'short length');
  t.equal(hex(der(0x04, Buffer.alloc(200))).slice(0, 6), '0481c8', 'long length, one byte');
  t.equal(hex(der(0x04, Buffer.alloc(300))).slice(0, 8), '0482012c', 'long length, two bytes');
  // ecdsa-with-SHA256: 1.2.840.10045.4.3.2 (840 = 0x86 0x48, 10045 = 0xce 0x3d).
  t.equal(hex(derOid('1.2.840.10045.4.3.2')), '06082a8648ce3d040302');
  t.equal(hex(derOid('2.5.29.17')), '0603551d11');
  t.equal(hex(derUInt(Buffer.from([0x80, 1]))), '0203008001', 'a leading 0x00 keeps it positive');
  t.equal(hex(derUInt(Buffer.from([0, 0, 5]))), '020105', 'leading zeros dropped');
  // keyUsage digitalSignature(0) keyCertSign(5) cRLSign(6): 1000 0110, one unused bit.
  t.equal(hex(derNamedBits([0, 5, 6])), '03020186');
  t.equal(hex(derNamedBits([0])), '03020780');
  t.equal(readTime(derTime(new Date('2049-12-31T23:59:59Z'))), '17:491231235959Z', 'UTCTime through 2049');
  t.equal(
    readTime(derTime(new Date('2050-01-01T00:00:00Z'))),
    '18:20500101000000Z',
    'GeneralizedTime from 2050',
  );
  t.equal(hex(ipBytes('127.0.0.1')), '7f000001');
  t.equal(hex(ipBytes('::1')), `${'0'.repeat(30)}01`);
  t.equal(hex(ipBytes('fe80::1:2')), `fe80${'0'.repeat(20)}00010002`);
  t.equal(hex(ipBytes('1:2:3:4:5:6:7:8')), '00010002000300040005000600070008');
  t.throws(() => ipBytes('::ffff:1.2.3.4'), /not an IP address/);
});

function readTime(b: Buffer): string {
  return `${b[0].toString(16)}:${b.subarray(2).toString()}`;
}

t.test('the home CA and server certificate: modes, chain, SAN', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'akbe-tlsfiles-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const files = ensureNatsTls(
    join(home, 'tls'),
    tlsHosts({ AKBE_NATS_TLS_HOSTS: 'nats1.example, 10.0.0.7' }),
  );
  t.equal(statSync(files.dir).mode & 0o777, 0o700, 'folder 0700');
  for (const f of [files.caFile, files.caKeyFile, files.certFile, files.keyFile])
    t.equal(statSync(f).mode & 0o777, 0o600, `${f} 0600`);

  const ca = new X509Certificate(readFileSync(files.caFile));
  const server = new X509Certificate(readFileSync(files.certFile));
  t.equal(ca.ca, true, 'the CA is a CA');
  t.equal(server.ca, false, 'the server certificate is not');
  t.ok(ca.checkIssued(ca) && ca.verify(ca.publicKey), 'the CA is self-signed');
  t.ok(server.checkIssued(ca), 'the server certificate names the CA as issuer');
  t.ok(server.verify(ca.publicKey), "and carries the CA's signature");
  t.equal(server.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'P-256');
  t.same(certificateHosts(server), [
    '127.0.0.1',
    'localhost',
    '0:0:0:0:0:0:0:1',
    'nats1.example',
    '10.0.0.7',
  ]);
  t.ok(server.checkIP('127.0.0.1') && server.checkIP('::1') && server.checkHost('localhost'), 'loopback');
  t.equal(server.checkHost('evil.example'), undefined, 'no other name');
  const foreign = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  t.notOk(server.verify(foreign.publicKey), 'another key did not sign it');

  // Idempotent: a second use keeps every file; a host it lacks gets a new server certificate
  // from the same CA, keeping the hosts it named.
  const again = ensureNatsTls(files.dir, tlsHosts({}));
  t.equal(readFileSync(again.certFile, 'utf8'), readFileSync(files.certFile, 'utf8'), 'kept');
  const caPem = readFileSync(files.caFile, 'utf8');
  ensureNatsTls(files.dir, tlsHosts({}, ['nats2.example']));
  const reissued = new X509Certificate(readFileSync(files.certFile));
  t.not(reissued.serialNumber, server.serialNumber, 'a new server certificate');
  t.equal(readFileSync(files.caFile, 'utf8'), caPem, 'the same CA (clients pin it)');
  t.ok(reissued.verify(ca.publicKey), 'signed by it');
  t.same(
    certificateHosts(reissued).slice(-2),
    ['10.0.0.7', 'nats2.example'],
    'old hosts kept, new one added',
  );

  if (!hasOpenssl()) {
    t.comment('openssl not installed: its checks skipped');
    return;
  }
  const verify = execFileSync('openssl', ['verify', '-CAfile', files.caFile, files.certFile], {
    encoding: 'utf8',
  });
  t.match(verify, /: OK/, 'openssl verify: the chain');
  const text = execFileSync('openssl', ['x509', '-text', '-noout', '-in', files.certFile], {
    encoding: 'utf8',
  });
  t.match(text, /Version: 3/);
  t.match(text, /Signature Algorithm: ecdsa-with-SHA256/);
  t.match(text, /Issuer: O ?= ?akbe, CN ?= ?akbe home CA/);
  t.match(text, /IP Address:127\.0\.0\.1, DNS:localhost, IP Address:0:0:0:0:0:0:0:1, DNS:nats1\.example/);
  t.match(text, /TLS Web Server Authentication, TLS Web Client Authentication/);
  t.match(text, /Basic Constraints: critical\s+CA:FALSE/);
  const caText = execFileSync('openssl', ['x509', '-text', '-noout', '-in', files.caFile], {
    encoding: 'utf8',
  });
  t.match(caText, /CA:TRUE, pathlen:0/);
  t.match(caText, /Digital Signature, Certificate Sign, CRL Sign/);
});

t.test('a certificate from another CA does not chain to the home CA', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'akbe-tlsforeign-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const mine = ensureNatsTls(join(home, 'mine'));
  const theirs = ensureNatsTls(join(home, 'theirs'));
  const ca = new X509Certificate(readFileSync(mine.caFile));
  const rogue = new X509Certificate(readFileSync(theirs.certFile));
  // Same subject and issuer names (every akbe CA is "akbe home CA"): only the signature tells.
  t.equal(rogue.issuer, ca.subject, 'the names match');
  t.notOk(rogue.verify(ca.publicKey), "but the home CA's key did not sign it");
  // A certificate whose issuer name differs from the CA's subject does not claim it at all.
  const key = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const other = new X509Certificate(
    issueCertificate({
      subject: { cn: 'x' },
      issuer: { cn: 'not akbe' },
      publicKey: key.publicKey,
      issuerKey: key.privateKey,
      issuerPublicKey: key.publicKey,
      notBefore: new Date(),
      notAfter: new Date(Date.now() + 86_400_000),
    }),
  );
  t.notOk(other.checkIssued(ca), 'another issuer');
});

t.test('the TLS files are issued under a lock: a second process waits for the first', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'akbe-tlslock-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const dir = join(home, 'tls');
  mkdirSync(dir, { mode: 0o700 });
  // This process holds the lock, as one issuing a CA would, while another one needs the files.
  const lock = join(dir, '.lock');
  writeFileSync(lock, '');
  const module = pathToFileURL(resolve('src/actors/nats/nats-tls.ts')).href;
  const code = `const { ensureNatsTls } = await import(${JSON.stringify(module)}); ensureNatsTls(${JSON.stringify(dir)});`;
  const child = spawn(process.execPath, [...tsLoaderArgs(), '--input-type=module', '-e', code], {
    stdio: 'inherit',
  });
  const exited = new Promise((r) => child.once('exit', r));
  await new Promise((r) => setTimeout(r, 1_500));
  t.notOk(existsSync(join(dir, 'ca.pem')), 'nothing issued while the lock is held');
  t.equal(child.exitCode, null, 'the other process waits');
  rmSync(lock);
  t.equal(await exited, 0, 'and finishes once it is released');
  const files = natsTlsFiles(dir);
  const ca = new X509Certificate(readFileSync(files.caFile));
  const cert = new X509Certificate(readFileSync(files.certFile));
  t.ok(cert.verify(ca.publicKey), 'the server certificate is from the CA on disk');
  t.ok(cert.checkPrivateKey(createPrivateKey(readFileSync(files.keyFile))), 'and matches the key on disk');
  t.ok(ca.checkPrivateKey(createPrivateKey(readFileSync(files.caKeyFile))), 'the CA matches its key');
  t.notOk(existsSync(lock), 'no lock left behind');
  // A lock whose holder died (older than 30 s) does not block: the files are issued at once.
  rmSync(dir, { recursive: true });
  mkdirSync(dir, { mode: 0o700 });
  writeFileSync(lock, '');
  const old = (Date.now() - 60_000) / 1000;
  utimesSync(lock, old, old);
  const started = Date.now();
  ensureNatsTls(dir);
  t.ok(Date.now() - started < 5_000, 'a stale lock is taken over');
  t.ok(existsSync(files.certFile));
});
