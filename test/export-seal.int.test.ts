/**
 * Issue 11 item 5: `akbe events export` seals its lines (hash chain + the run's digest, signed
 * with the orchestrator's nkey) and `akbe replay --file` checks the seal before auditing. The
 * attack: a consistent rewrite of the export that the audit alone accepts (an answer renamed
 * everywhere: gold answers, responses, turn texts), then the same rewrite re-chained and
 * re-signed with the attacker's own key.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createUser } from '@nats-io/nkeys';
import t from 'tap';
import { readSeed, seedPath } from '../src/actors/nats/nats-auth.js';
import { ExportChain, parseSealLine, sealLine } from '../src/audit/export-seal.js';
import { parseEventJson } from '../src/audit/jsonl.js';
import { EventStore } from '../src/events/store.js';
import { auditRunEvents } from './helpers/audit-run.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';

delete process.env.NATS_URL;

const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const run = await auditRunEvents({ runId: 'sealed-run', steps: 1 });
await store.appendMany(run.events);
const orchestrator = readSeed(seedPath(nats.authDir, 'orchestrator')).getPublicKey();
const dir = mkdtempSync(join(tmpdir(), 'akbe-seal-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'run.jsonl');
const exported = await runCli(
  'events',
  'export',
  '--run',
  'sealed-run',
  '--out',
  file,
  '--nats',
  nats.server.url,
);
const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
const eventLines = lines.slice(0, -1);

function write(name: string, body: string[]): string {
  const path = join(dir, name);
  writeFileSync(path, `${body.join('\n')}\n`);
  return path;
}

/** The consistent rewrite: one answer renamed in every line (gold, responses, texts). */
const rewritten = eventLines.map((l) => l.replaceAll('paris', 'lyon'));

t.test('the export ends with a seal signed by the orchestrator', async (t) => {
  t.equal(exported.code, 0, exported.err);
  t.match(exported.err, new RegExp(`sealed by ${orchestrator}`));
  const seal = parseSealLine(lines.at(-1)!);
  t.ok(seal, 'the last line is the seal');
  t.equal(seal!.signer, orchestrator);
  t.equal(seal!.events, run.events.length);
  t.equal(
    seal!.finished,
    run.events.some((e) => e.type === 'run.finished'),
  );
  const ok = await runCli('replay', '--file', file, '--signer', orchestrator);
  t.equal(ok.code, 0, ok.out + ok.err);
  t.match(
    ok.err,
    /export seal ok: \d+ events of run sealed-run chained and signed by U\w+ \(the expected signer\)/,
  );
  t.match(ok.out, /replay of run sealed-run: clean/);
});

t.test('a consistent rewrite fools the audit alone but not the seal', async (t) => {
  t.not(rewritten.join('\n'), eventLines.join('\n'), 'the rewrite changed something');
  const path = write('rewritten.jsonl', [...rewritten, lines.at(-1)!]);
  const unsigned = await runCli('replay', '--file', path, '--unsigned');
  t.equal(unsigned.code, 0, `the audit alone finds nothing: ${unsigned.out}`);
  const sealed = await runCli('replay', '--file', path);
  t.equal(sealed.code, 1);
  t.match(sealed.err, /the events do not match the seal \(chain: .*the file was changed after export/);
  t.notMatch(sealed.out, /clean/, 'no audit report is printed for a broken seal');
});

t.test('re-chaining keeps the signature from verifying; re-signing shows a foreign signer', async (t) => {
  const chain = new ExportChain('sealed-run');
  for (const l of rewritten) chain.add(l, parseEventJson(l));
  // The seal's digest updated to the new chain, the orchestrator's signature kept.
  const forged = JSON.parse(sealLine(chain, createUser().getSeed()));
  const kept = parseSealLine(lines.at(-1)!)!;
  forged.akbeExportSeal.signer = kept.signer;
  forged.akbeExportSeal.signature = kept.signature;
  const r1 = await runCli(
    'replay',
    '--file',
    write('rechained.jsonl', [...rewritten, JSON.stringify(forged)]),
  );
  t.equal(r1.code, 1);
  t.match(r1.err, /signature does not verify/);
  // Re-signed with the attacker's key: verifies, but the pinned orchestrator key refuses it.
  const attacker = createUser();
  const resigned = write('resigned.jsonl', [...rewritten, sealLine(chain, attacker.getSeed())]);
  const r2 = await runCli('replay', '--file', resigned, '--signer', orchestrator);
  t.equal(r2.code, 1);
  t.match(r2.err, `signed by ${attacker.getPublicKey()}, not by the expected orchestrator ${orchestrator}`);
  const r3 = await runCli('replay', '--file', resigned);
  t.match(r3.err, `signed by ${attacker.getPublicKey()} (pass --signer KEY`, 'the signer is always shown');
});

t.test('dropped, reordered or unsealed lines are refused', async (t) => {
  const seal = lines.at(-1)!;
  const dropped = await runCli(
    'replay',
    '--file',
    write('dropped.jsonl', [...eventLines.slice(0, -2), seal]),
  );
  t.match(dropped, { code: 1, err: /do not match the seal \(events: sealed \d+, found \d+\)/ });
  const swapped = [...eventLines];
  [swapped[3], swapped[4]] = [swapped[4], swapped[3]];
  t.match(await runCli('replay', '--file', write('swapped.jsonl', [...swapped, seal])), {
    code: 1,
    err: /do not match the seal/,
  });
  t.match(await runCli('replay', '--file', write('cut.jsonl', eventLines)), { code: 1, err: /no seal line/ });
  t.match(await runCli('replay', '--file', write('after.jsonl', [...eventLines, seal, eventLines[0]])), {
    code: 1,
    err: /content after the seal line/,
  });
  t.match(await runCli('replay', '--run', 'sealed-run', '--unsigned', '--nats', nats.server.url), {
    code: 2,
    err: /need --file/,
  });
});
