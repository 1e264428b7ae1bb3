/**
 * The audit against the integration's own event sink (src/actors/log/event-sink.ts `factToEvent`):
 * the machines' facts of a small run, mapped by the sink, audit clean. What the sink does not
 * record yet may only appear as notes (parts not checked), never as mismatches.
 */

import t from 'tap';
import { createActor, toPromise } from 'xstate';
import { ReplayUnavailableError, replayRun } from '../src/actors/inspect/inspect-replay.js';
import { factToEvent } from '../src/actors/log/fact-events.js';
import { OracleRates } from '../src/actors/orchestrator/oracle-rates.js';
import { auditRun, auditRunLog } from '../src/audit/audit.js';
import { foldRunLog } from '../src/audit/run-log.js';
import { fillSegments, segmentsFromTokens } from '../src/audit/segments.js';
import { type AkbeEvent, createEvent, type ResponseSegment } from '../src/events/catalog.js';
import { manifestDigest, sha256Hex } from '../src/events/train-digest.js';
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
// The learner's digest of each step's request, and the trainer's of what it trained on (version
// v is step v - 1's): equal, as in a clean run.
const stepDigest = (step: number) => sha256Hex(`train request of step ${step}`);
const published = (version: number) => ({
  bucket: 'akbe-checkpoints',
  checkpoint: 'c',
  sha256: 'ab'.repeat(32),
  bytes: 1,
  requestSha256: stepDigest(version - 1),
  manifest: { 'model.safetensors': 'ab'.repeat(32) },
  manifestSha256: manifestDigest({ 'model.safetensors': 'ab'.repeat(32) }),
});
// The oracle rates as the orchestrator wires them: the facts seen first, then the event formed.
const oracle = new OracleRates(questions);
for (const f of facts) {
  oracle.see(f);
  const e = factToEvent(f, {
    runId,
    published,
    requestSha256: stepDigest,
    extra: (step) => oracle.extra(step),
  });
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

t.test('the sink records every turn text, and they equal the texts rebuilt from token ids', async (t) => {
  const completed = logged.filter((e) => e.type === 'rollout.completed');
  t.equal(completed.length, 2 * 3 * 5);
  t.ok(
    completed.every((e) => e.type === 'rollout.completed' && (e.data.segments?.length ?? 0) > 0),
    'every rollout.completed carries rollout.completed.segments',
  );
  // A fresh copy: the log of the other subtests is never written to.
  const log = foldRunLog(logged.map((e) => structuredClone(e)));
  let compared = 0;
  for (const s of log.steps.values())
    for (const q of s.questions.values())
      for (const r of q.rollouts.values()) {
        if (!r.completed || r.turns.length === 0) continue;
        // The scripted machines join turns without the worker's leading space; the grammar ignores it.
        const trim = (xs: ResponseSegment[] | undefined) =>
          xs?.map((x) => ({ kind: x.kind, text: x.text.trim() }));
        t.same(
          trim(r.completed.data.segments),
          trim(segmentsFromTokens(r, (ids) => tok.decode(Array.from(ids)))),
          `${r.completed.meta.rolloutId}: recorded segments = decoded turns`,
        );
        compared++;
      }
  t.equal(compared, 2 * 3 * 5, 'every rollout compared');
  t.equal(
    fillSegments(log, (ids) => tok.decode(Array.from(ids))),
    0,
    'nothing left to fill from token ids',
  );
  const r = auditRunLog(log);
  t.same(r.mismatches, []);
  t.notOk(
    r.notes.some((n) => /without segments/.test(n)),
    'the format was checked from the recorded text',
  );
});

t.test(
  'a log without recorded texts: the audit notes it, fillSegments rebuilds them, the run re-plays',
  async (t) => {
    const bare = logged.map((e) => {
      const c = structuredClone(e);
      if (c.type === 'rollout.completed') delete c.data.segments;
      return c;
    });
    t.ok(
      auditRunLog(foldRunLog(bare.map((e) => structuredClone(e)))).notes.some((n) =>
        /without segments/.test(n),
      ),
      'the audit says the format flags were taken as recorded',
    );
    await t.rejects(replayRun(foldRunLog(bare.map((e) => structuredClone(e)))), ReplayUnavailableError);
    await t.rejects(replayRun(foldRunLog(bare.map((e) => structuredClone(e)))), {
      message: /rollout\.completed\.segments is not recorded/,
    });
    const log = foldRunLog(bare);
    t.equal(
      fillSegments(log, (ids) => tok.decode(Array.from(ids))),
      2 * 3 * 5,
      'every rollout without recorded texts',
    );
    const r = auditRunLog(log);
    t.same(r.mismatches, []);
    t.notOk(
      r.notes.some((n) => /without segments/.test(n)),
      'the format was re-checked from text',
    );
    const replay = await replayRun(log);
    t.same(replay.divergences, []);
    t.equal(replay.steps, 2);
  },
);

t.test('the inspector re-plays the sink log as recorded', async (t) => {
  const replay = await replayRun(foldRunLog(logged.map((e) => structuredClone(e))));
  t.same(replay.divergences, [], 'the sink records turn texts: the run re-plays');
  t.equal(replay.steps, 2);
});
