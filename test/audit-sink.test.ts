/**
 * The audit against the integration's own event sink (src/actors/event-sink.ts `factToEvent`):
 * the machines' facts of a small run, mapped by the sink, audit clean. What the sink does not
 * record yet may only appear as notes (parts not checked), never as mismatches.
 */
import t from 'tap';
import { createActor, toPromise } from 'xstate';
import { factToEvent } from '../src/actors/event-sink.js';
import { ReplayUnavailableError, replayRun } from '../src/actors/inspect-replay.js';
import { auditRun, auditRunLog } from '../src/audit/audit.js';
import { foldRunLog } from '../src/audit/run-log.js';
import { fillSegments } from '../src/audit/segments.js';
import { type AkbeEvent, createEvent } from '../src/events/catalog.js';
import type { AkbeFact } from '../src/machines/facts.js';
import type { TrainRequest } from '../src/machines/learner.js';
import { auditRunInput, scriptedMachines, withSeqs } from './helpers/audit-run.js';
import { ToyTokenizer } from './helpers/scripted-policy.js';

const tok = new ToyTokenizer();
const { config, questions, input } = auditRunInput(tok, { steps: 2 });
const facts: AkbeFact[] = [];
const actor = createActor(scriptedMachines(tok, [] as TrainRequest[]), { input });
actor.on('*', (f) => facts.push(f as AkbeFact));
actor.start();
await toPromise(actor);

const runId = 'sink-run';
const events: AkbeEvent[] = [
  createEvent(
    'run.started',
    {
      algo: 'grpo+akbe',
      config: { ...config, questionPoolSize: questions.length },
      seeds: { run: config.seed },
      worldRef: 'world:test',
      policyRef: 'policy:test',
      akbeVersion: '0.1.0',
    },
    { runId, step: 0, policyVersion: 0 },
  ),
];
const published = () => ({ bucket: 'akbe-checkpoints', checkpoint: 'c', sha256: 'ab'.repeat(32), bytes: 1 });
for (const f of facts) {
  const e = factToEvent(f, { runId, published });
  if (e) events.push(e);
}
const logged = withSeqs(events);

t.test("the event sink's log of a run audits without a mismatch", async (t) => {
  const r = auditRun(logged);
  t.same(r.mismatches, []);
  t.equal(r.checked.rollouts, 2 * 3 * 5);
  t.equal(r.checked.labels, 6);
  t.equal(r.checked.steps, 2);
  const known = [
    'rollout.completed without segments: format flags taken as recorded',
    'learner.step without batch: advantages and trained rows not checked',
  ];
  for (const n of r.notes) t.ok(known.includes(n), `only known gaps are noted: ${n}`);
});

t.test('and a changed reward in it is still found', async (t) => {
  const copy = logged.map((e) => structuredClone(e));
  const victim = copy.find((e) => e.type === 'rollout.completed' && e.data.reward === 1)!;
  if (victim.type === 'rollout.completed') victim.data.reward = 0;
  t.same(
    auditRun(copy).mismatches.map((m) => [m.seq, m.field]),
    [[victim.meta.seq, 'reward']],
  );
});

t.test('texts rebuilt from token ids with the tokenizer: format re-checked, the run re-plays', async (t) => {
  const log = foldRunLog(logged.map((e) => structuredClone(e)));
  const filled = fillSegments(log, (ids) => tok.decode(Array.from(ids)));
  const hasText = logged.some((e) => e.type === 'rollout.completed' && e.data.segments);
  t.equal(filled, hasText ? 0 : 2 * 3 * 5, 'every rollout without recorded texts');
  const r = auditRunLog(log);
  t.same(r.mismatches, []);
  t.notOk(
    r.notes.some((n) => /without segments/.test(n)),
    'the format was re-checked from text',
  );
  const replay = await replayRun(log);
  t.same(replay.divergences, []);
  t.equal(replay.steps, 2);
});

t.test('the inspector re-play says what it lacks instead of diverging', async (t) => {
  const log = foldRunLog(logged);
  const hasText = logged.some((e) => e.type === 'rollout.completed' && e.data.segments);
  if (hasText) {
    t.same((await replayRun(log)).divergences, [], 'the sink records turn texts: the run re-plays');
  } else {
    await t.rejects(replayRun(log), ReplayUnavailableError);
    await t.rejects(replayRun(log), { message: /rollout\.completed\.segments is not recorded/ });
  }
});
