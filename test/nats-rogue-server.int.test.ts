/**
 * Issue 23 item 4, the rogue-server attack: another local user listens first on the URL a victim
 * uses (127.0.0.1:4222 in the infra configs and README), fills a server with a tampered copy of
 * a run, and has the victim's `akbe events export` seal it with the real orchestrator key. Now
 * every akbe client pins a CA (the home's), so a plain server, or one whose certificate comes
 * from another CA, is refused in one line naming the URL and the CA file, and nothing is
 * exported or sealed. Only an explicit --nats-insecure believes it, with a warning.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import t from 'tap';
import { connectAkbeNats } from '../src/actors/nats/connection.js';
import { ensureNatsAuth, readSeed, seedPath } from '../src/actors/nats/nats-auth.js';
import { type LocalNatsServer, startNatsServer } from '../src/actors/nats/nats-server.js';
import { ensureNatsTls, natsTlsDir } from '../src/actors/nats/nats-tls.js';
import { trustRecord } from '../src/actors/nats/nats-trust.js';
import { parseSealLine } from '../src/audit/export-seal.js';
import { parseEventJson } from '../src/audit/jsonl.js';
import { eventToJsonLine } from '../src/events/codec.js';
import { EventStore } from '../src/events/store.js';
import { auditRunEvents } from './helpers/audit-run.js';
import { runCli } from './helpers/cli.js';

delete process.env.NATS_URL;
delete process.env.AKBE_NATS_TLS_CA;
delete process.env.AKBE_NATS_INSECURE;

const dir = mkdtempSync(join(tmpdir(), 'akbe-rogue-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
// The victim: a home with its credentials (the orchestrator key that seals exports) and its CA.
const home = join(dir, 'victim');
const victimKey = readSeed(
  seedPath(ensureNatsAuth(join(home, 'nats', 'auth')), 'orchestrator'),
).getPublicKey();
const caFile = ensureNatsTls(natsTlsDir(home)).caFile;
const runId = 'tampered';

/** The attacker's server, open to anyone (no credentials), holding a tampered copy of a run. */
async function rogueServer(name: string, tls: string | false): Promise<LocalNatsServer> {
  const server = await startNatsServer({ storeDir: join(dir, name, 'store'), auth: false, tls });
  t.teardown(() => server.stop());
  const tlsOpts = tls ? { tls: { caFile: ensureNatsTls(tls).caFile } } : {};
  const nc = await connect({ servers: server.url, ...tlsOpts });
  const store = await EventStore.open(nc);
  const run = await auditRunEvents({ runId, steps: 1 });
  // The tampering: one answer renamed everywhere (what the audit alone accepts).
  const tampered = run.events.map((e) => parseEventJson(eventToJsonLine(e).replaceAll('paris', 'lyon')));
  await store.appendMany(tampered);
  await nc.close();
  return server;
}

const plain = await rogueServer('plain', false);
const foreign = await rogueServer('foreign', join(dir, 'attacker-tls'));

async function exportFrom(url: string, ...flags: string[]) {
  const file = join(dir, `export-${url.split(':').at(-1)}-${flags.length}.jsonl`);
  const r = await runCli(
    'events',
    'export',
    '--run',
    runId,
    '--out',
    file,
    '--nats',
    url,
    '--home',
    home,
    ...flags,
  );
  return { ...r, file };
}

const refusal = (url: string, reason: string) =>
  new RegExp(
    `^akbe events export: cannot connect to NATS at ${url} \\(flag\\): the server did not prove itself with a certificate from the CA ${caFile} \\(${reason}\\); [^\\n]*--nats-ca FILE[^\\n]*--nats-insecure[^\\n]*\\n$`,
  );

t.test('a plain server on the URL: refused in one line, nothing exported or sealed', async (t) => {
  const r = await exportFrom(plain.url);
  t.equal(r.code, 1);
  t.match(r.err, refusal(plain.url, "server does not support 'tls'"));
  t.equal(r.out, '', 'nothing on stdout');
  t.notOk(existsSync(r.file), 'no export file');
});

t.test('a server with a certificate from another CA: refused, nothing sealed', async (t) => {
  // The attacker's CA is an akbe home CA too (same names); only the signature differs.
  const r = await exportFrom(foreign.url);
  t.equal(r.code, 1);
  t.match(
    r.err,
    refusal(foreign.url, '(self[- ]signed certificate in certificate chain|unable to verify[^)]*)'),
  );
  t.notOk(existsSync(r.file), 'no export file');
});

t.test('NATS_URL pointing at the rogue: the client refuses it too', async (t) => {
  for (const url of [plain.url, foreign.url])
    await t.rejects(
      connectAkbeNats({ home, env: { NATS_URL: url, AKBE_HOME: home } }),
      new RegExp(`cannot connect to NATS at ${url} \\(env\\): the server did not prove itself .*${caFile}`),
    );
});

t.test('--nats-ca with the right CA, and --nats-insecure, are the only ways in', async (t) => {
  // Pinning the attacker's CA on purpose is a choice the user makes (the flag), and works.
  const viaCa = await exportFrom(foreign.url, '--nats-ca', join(dir, 'attacker-tls', 'ca.pem'));
  t.equal(viaCa.code, 0, viaCa.err);
  // The attack as it was, now only with the explicit flag: the tampered copy, sealed by the
  // victim's key, after a warning on stderr.
  const warned: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string) => warned.push(String(chunk)) > 0) as typeof process.stderr.write;
  const insecure = await exportFrom(plain.url, '--nats-insecure').finally(() => {
    process.stderr.write = write;
  });
  t.equal(insecure.code, 0, insecure.err);
  t.match(warned.join(''), new RegExp(`WARNING: --nats-insecure: connecting to ${plain.url} without TLS`));
  const lines = readFileSync(insecure.file, 'utf8').trimEnd().split('\n');
  t.equal(parseSealLine(lines.at(-1)!)?.signer, victimKey, "sealed with the victim's key");
  t.match(lines.join('\n'), /lyon/, 'the tampered copy');
  t.notOk(process.env.AKBE_NATS_INSECURE, 'the flag does not outlive the command');
  const both = await exportFrom(plain.url, '--nats-insecure', '--nats-ca', caFile);
  t.equal(both.code, 2, 'both flags: a usage error');
});

t.test('what a connection believed, as run.started records it', async (t) => {
  const insecure = await connectAkbeNats({ url: plain.url, home, env: { AKBE_NATS_INSECURE: '1' } });
  t.same(trustRecord(insecure.trust!), { tls: 'insecure' });
  await insecure.close();
  const pinned = await connectAkbeNats({
    url: foreign.url,
    home,
    env: { AKBE_NATS_TLS_CA: join(dir, 'attacker-tls', 'ca.pem') },
  });
  const record = trustRecord(pinned.trust!);
  t.equal(record.tls, 'ca');
  t.equal(record.caSource, 'env');
  t.match(record.caSha256, /^[0-9a-f]{64}$/);
  await pinned.close();
});

t.test("this home's own server is believed by its CA even with AKBE_NATS_TLS_CA set elsewhere", async (t) => {
  // AKBE_NATS_TLS_CA pins a remote cluster's CA; a run that starts its embedded server (no URL)
  // must still believe that server, which presents the home's certificate.
  const own = join(dir, 'own-home');
  const env = { AKBE_HOME: own, AKBE_NATS_TLS_CA: join(dir, 'attacker-tls', 'ca.pem') };
  const nats = await connectAkbeNats({ home: own, env, embedded: true });
  t.teardown(() => nats.close());
  t.equal(nats.source, 'embedded');
  t.equal(nats.trust?.tls === 'ca' && nats.trust.caFile, join(own, 'nats', 'tls', 'ca.pem'));
  // An explicit URL still pins the CA the user named: the same server is then refused.
  await t.rejects(connectAkbeNats({ url: nats.url, home: own, env }), /did not prove itself/);
});
