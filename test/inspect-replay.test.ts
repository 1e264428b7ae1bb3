import { Packr } from 'msgpackr';
import t from 'tap';
import { WebSocket } from 'ws';
import { startInspector } from '../src/actors/inspect/inspect.js';
import { ReplayUnavailableError, replayRun, runInputFromLog } from '../src/actors/inspect/inspect-replay.js';
import { foldRunLog } from '../src/audit/run-log.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { CODEC_OPTIONS, decodeEvent } from '../src/events/codec.js';
import { auditRunEvents, withSeqs } from './helpers/audit-run.js';

const run = await auditRunEvents({ runId: 'rp', steps: 2 });
const events = withSeqs(run.events);

t.test('re-running the machines on the recorded outputs reproduces the run exactly', async (t) => {
  const log = foldRunLog(events);
  const input = runInputFromLog(log);
  // Every question a step drew is rebuilt, in the pool slot it had in the run; the rest are fillers.
  const drawn = new Set(events.flatMap((e) => (e.type === 'step.started' ? e.data.questionIds : [])));
  t.ok(drawn.size >= 2, `${drawn.size} questions drawn`);
  t.equal(input.questions.length, run.questions.length, 'the whole pool');
  t.same(
    input.questions
      .filter((q) => !q.id.startsWith('unused'))
      .map((q) => q.id)
      .sort(),
    [...drawn].sort(),
  );
  input.questions.forEach((q, i) => {
    if (q.id.startsWith('unused')) return;
    t.equal(q.id, run.questions[i].id, `pool slot ${i}`);
    t.same(q.gold, run.questions[i].gold, `${q.id}: gold answers`);
  });
  const r = await replayRun(log);
  t.same(r.divergences, []);
  t.equal(r.steps, 2);
  const recordedFacts = events.filter((e) => e.type !== 'run.started').length;
  t.equal(r.facts, recordedFacts, 'the machines report again exactly the facts the log holds');
});

t.test('a log that does not match its machines is reported as a divergence with the sequence', async (t) => {
  const copy = events.map((e) => structuredClone(e));
  const target = copy.find(
    (e) => e.type === 'rollout.completed' && e.data.toolCalls > 0,
  ) as EventOf<'rollout.completed'>;
  // The recorded text of the first turn now answers at once: the re-run stops early.
  const gen = target.data.segments!.find((s) => s.kind === 'generated')!;
  gen.text = '<answer> rome </answer>';
  const r = await replayRun(foldRunLog(copy));
  t.ok(
    r.divergences.some((d) => d.seq === target.meta.seq),
    JSON.stringify(r.divergences),
  );
});

t.test('without the question pool size the replay says which field is missing', async (t) => {
  const copy = events.map((e) => structuredClone(e)) as AkbeEvent[];
  delete (copy[0] as EventOf<'run.started'>).data.questionPoolSize;
  t.throws(() => runInputFromLog(foldRunLog(copy)), ReplayUnavailableError);
  t.throws(() => runInputFromLog(foldRunLog(copy)), { message: /questionPoolSize/ });
});

t.test("replaying to the inspector: a viewer receives the recorded run's machines", async (t) => {
  const insp = await startInspector({ port: 0 });
  t.teardown(() => insp.close());
  const ws = new WebSocket(insp.wsUrl);
  const msgs: Array<{ type: string; definition?: string; sessionId: string }> = [];
  ws.on('message', (d) => msgs.push(JSON.parse(String(d))));
  await new Promise((r) => ws.once('open', r));
  const closed = new Promise((r) => ws.once('close', r));
  const r = await replayRun(foldRunLog(events), { inspect: insp.inspect });
  t.same(r.divergences, []);
  await insp.close();
  await closed;
  const ids = msgs
    .filter((m) => m.type === '@xstate.actor' && m.definition)
    .map((m) => JSON.parse(m.definition!).id);
  t.equal(ids.filter((x) => x === 'run').length, 1);
  t.equal(ids.filter((x) => x === 'question').length, 2 * 3, 'B questions x 2 steps');
  t.equal(ids.filter((x) => x === 'rollout').length, 2 * 3 * 5, 'x (G_wt + G_nt)');
  t.ok(msgs.filter((m) => m.type === '@xstate.snapshot').length > 100);
});

t.test('a log from before rollout.completed v3 (no call spans) replays without divergence', async (t) => {
  // maxToolCalls 1: a second search is refused (tool-limit), a call the v2 -> v3 upcast gives no span.
  const old = await auditRunEvents({ runId: 'rp2', steps: 1, config: { maxToolCalls: 1 } });
  const packr = new Packr(CODEC_OPTIONS);
  const v2 = old.events.map((e) => {
    if (e.type !== 'rollout.completed') return e;
    const { toolCallSpans: _spans, ...data } = e.data;
    return decodeEvent(packr.pack({ ...e, v: 2, data })); // what a v2 log reads back as
  });
  const done = v2.filter((e): e is EventOf<'rollout.completed'> => e.type === 'rollout.completed');
  const limited = done.filter((e) => e.data.stopReason === 'tool-limit');
  t.ok(limited.length > 0, `${limited.length} tool-limit rollouts`);
  t.ok(
    limited.every((e) => e.data.toolCallSpans.length === e.data.toolCalls),
    'upcast: the refused call has no span (the old rule counted calls before observations)',
  );
  t.ok(
    done.some((e) => e.data.toolCallSpans.some(([s, end]) => end - s > 3)),
    'whole-turn spans',
  );
  const r = await replayRun(foldRunLog(withSeqs(v2)));
  t.same(r.divergences, []);
});
