/**
 * Acceptance (issue 7, replay and audit): a run's log in a real nats-server replays clean (exit 0);
 * a copy with one recorded reward changed makes `akbe replay` name that event's sequence and
 * exit 1. Also `--question` (boundary history), `akbe runs`, and `--inspect` re-play.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { auditRunEvents } from './helpers/audit-run.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';

delete process.env.NATS_URL;
process.env.CI = 'true'; // no browser, no holding the inspector relay open

/** The run's events under another run id (fresh dedupe ids), with `edit` applied to the copies. */
function copyRun(
  events: readonly AkbeEvent[],
  from: string,
  to: string,
  edit: (e: AkbeEvent) => void = () => {},
) {
  return events.map((e) => {
    const c = structuredClone(e);
    c.meta.runId = to;
    c.meta.dedupeId = c.meta.dedupeId.replace(`${from}:`, `${to}:`);
    edit(c);
    return c;
  });
}

const nats = await withNats(t);
const url = nats.server.url;
const store = await EventStore.open(nats.nc);
const run = await auditRunEvents({ runId: 'clean-run', steps: 2 });
await store.appendMany(run.events);

// The tampered copy: one with-tool rollout's reward flipped.
let victim = '';
// Made under its own id (train request digests are bound to the run id, so a copy of clean-run
// under another id would also differ there), the same machines, seed and config.
const twin = await auditRunEvents({ runId: 'tampered-run', steps: 2 });
const tampered = copyRun(twin.events, 'tampered-run', 'tampered-run', (e) => {
  if (!victim && e.type === 'rollout.completed' && e.data.path === 'with-tool') {
    victim = e.meta.rolloutId;
    e.data.reward = 1 - e.data.reward;
  }
});
const acks = await store.appendMany(tampered);
const victimSeq =
  acks[tampered.findIndex((e) => e.type === 'rollout.completed' && e.meta.rolloutId === victim)].seq;

t.test('a clean log replays with exit 0', async (t) => {
  const r = await runCli('replay', '--run', 'clean-run', '--nats', url);
  t.equal(r.code, 0, r.out + r.err);
  t.match(
    r.out,
    /replay of run clean-run: clean \(30 rollouts, 6 labels, 2 learner steps, \d+ trained rows recomputed/,
  );
  t.notMatch(r.out, /MISMATCH|note:/);
});

t.test("one changed reward: replay names that event's sequence number and exits 1", async (t) => {
  const r = await runCli('replay', '--run', 'tampered-run', '--nats', url);
  t.equal(r.code, 1);
  const lines = r.out.split('\n').filter((l) => l.startsWith('MISMATCH'));
  t.equal(lines.length, 1, r.out);
  t.match(
    lines[0],
    new RegExp(
      `^MISMATCH seq ${victimSeq} rollout\\.completed step \\d+ q\\d+ ${victim.replace(/\./g, '\\.')}: reward: recorded [01], recomputed [01]$`,
    ),
  );
  t.match(r.out, /1 mismatch /);
  const json = await runCli('replay', '--run', 'tampered-run', '--json', '--nats', url);
  t.equal(json.code, 1);
  t.match(JSON.parse(json.out).mismatches, [{ seq: victimSeq, field: 'reward', rolloutId: victim }]);
});

t.test('--question prints the boundary history across steps', async (t) => {
  const labels = run.events.filter((e) => e.type === 'boundary.labeled') as EventOf<'boundary.labeled'>[];
  const q = labels[0].meta.questionId;
  const r = await runCli('replay', '--run', 'clean-run', '--question', q, '--nats', url);
  t.equal(r.code, 0, r.err);
  t.match(r.out, new RegExp(`boundary history of question ${q} \\(\\d+ steps?`));
  t.match(r.out, /step\s+policy\s+category/);
  for (const l of labels.filter((x) => x.meta.questionId === q))
    t.match(r.out, new RegExp(`\\n${l.meta.step}\\s+v${l.meta.policyVersion}\\s+${l.data.category}`));
  const missing = await runCli('replay', '--run', 'clean-run', '--question', 'nope', '--nats', url);
  t.equal(missing.code, 1);
  t.match(missing.err, /--question nope is not in run clean-run; its questions: q/);
});

t.test('akbe runs lists both runs with status, steps and algorithm', async (t) => {
  const r = await runCli('runs', '--nats', url);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^run\s+status\s+algorithm\s+steps/);
  t.match(r.out, /clean-run\s+completed\s+akbe\s+2\s+v2/);
  t.match(r.out, /tampered-run\s+completed\s+akbe\s+2\s+v2/);
  const json = await runCli('runs', '--json', '--nats', url);
  const rows = json.out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  t.same(rows.map((x) => x.runId).sort(), ['clean-run', 'tampered-run']);
});

t.test('--inspect re-plays the run to the inspector relay (offline, CI: no browser, no hold)', async (t) => {
  const r = await runCli('replay', '--run', 'clean-run', '--inspect', '--inspect-port', '0', '--nats', url);
  t.equal(r.code, 0, r.out + r.err);
  t.match(r.err, /inspector: open http:\/\/127\.0\.0\.1:\d+ /);
  t.match(r.err, /re-played 2 steps \(\d+ facts, \d+ inspection events\), identical to the log/);
});

t.test('an outside auditor replays an `akbe events export` file with no NATS, same sequences', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-audit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const runId of ['clean-run', 'tampered-run']) {
    const file = join(dir, `${runId}.jsonl`);
    t.equal((await runCli('events', 'export', '--run', runId, '--out', file, '--nats', url)).code, 0);
  }
  const clean = await runCli('replay', '--file', join(dir, 'clean-run.jsonl'));
  t.equal(clean.code, 0, clean.out + clean.err);
  t.match(clean.out, /replay of run clean-run: clean/);
  const bad = await runCli('replay', '--file', join(dir, 'tampered-run.jsonl'));
  t.equal(bad.code, 1);
  t.match(bad.out, new RegExp(`^MISMATCH seq ${victimSeq} rollout\\.completed .*: reward: `, 'm'));
  const wrongRun = await runCli('replay', '--file', join(dir, 'clean-run.jsonl'), '--run', 'other');
  t.match(wrongRun, { code: 1, err: /has no events of run other/ });
});

t.test('usage errors exit 2 naming the flag; an unknown run exits 1 with the fix', async (t) => {
  t.match(await runCli('replay'), { code: 2, err: /missing required flag --run/ });
  t.match(await runCli('replay', '--run', 'a b'), { code: 2, err: /--run must be/ });
  t.match(await runCli('replay', '--run', 'x', '--inspect-port', '9'), { code: 2, err: /need --inspect/ });
  t.match(await runCli('replay', '--run', 'x', '--inspect', '--inspect-port', 'z'), {
    code: 2,
    err: /--inspect-port must be an integer/,
  });
  t.match(await runCli('replay', '--run', 'no-such-run', '--nats', url), {
    code: 1,
    err: /no events .*akbe runs/,
  });
});
