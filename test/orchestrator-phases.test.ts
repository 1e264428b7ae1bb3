/**
 * The orchestrator's pure parts: the resume point as a projection of the log, per-step timing on
 * an injected clock, run setup from loaded values, and the oracle rates of each learner step.
 */
import t from 'tap';
import { OracleRates } from '../src/actors/orchestrator/oracle-rates.js';
import { runSetup } from '../src/actors/orchestrator/run-setup.js';
import { StepTimer } from '../src/actors/orchestrator/step-timing.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { fold } from '../src/events/projection.js';
import { lastCategories, resumedFrom, resumePoint } from '../src/events/projections/resume-point.js';
import { validateTrainConfig } from '../src/rl/config.js';
import { searchTool } from '../src/tools/search.js';
import { group } from './helpers/rollouts.js';
import { syntheticRunEvents } from './helpers/synthetic.js';

const events = syntheticRunEvents({ runId: 'r1', steps: 3, questionsPerStep: 2 });

t.test('the resume point of a log cut after step 1: continue at step 2 with version 2', async (t) => {
  const lastOfStep1 = events.findIndex(
    (e) => e.type === 'policy.published' && (e as EventOf<'policy.published'>).data.version === 2,
  );
  const cut = events.slice(0, lastOfStep1 + 1);
  const p = fold(resumePoint, cut);
  t.same(resumedFrom(p), { step: 1, version: 2 });
  t.equal(p.known.size, cut.length, 'every dedupe id');
  t.ok(p.runStarted);
  t.notOk(p.finished);
  const labels = cut.filter((e): e is EventOf<'boundary.labeled'> => e.type === 'boundary.labeled');
  const last = new Map(labels.map((e) => [e.meta.questionId, e.data.category]));
  t.same(lastCategories(p), Object.fromEntries(last), "each question's latest category of a published step");
  const redone = fold(resumePoint, [
    ...cut,
    ...events.slice(lastOfStep1 + 1).filter((e) => e.type === 'boundary.labeled'),
  ]);
  t.same(lastCategories(redone), Object.fromEntries(last), 'labels of the unpublished step do not count');
  t.ok(fold(resumePoint, events).finished, 'run.finished ends it');
  t.same(
    resumedFrom(fold(resumePoint, events.slice(0, 1))),
    { step: -1, version: 0 },
    'nothing published yet',
  );
});

t.test('the base version (0) is not a training step: it moves no resume point', async (t) => {
  const base = structuredClone(
    events.find((e) => e.type === 'policy.published')!,
  ) as EventOf<'policy.published'>;
  base.data.version = 0;
  base.meta.dedupeId = 'base';
  t.same(resumedFrom(fold(resumePoint, [events[0], base as AkbeEvent])), { step: -1, version: 0 });
});

t.test(
  'step timing: rollout phase ends at the last rollout or at training, whichever is first',
  async (t) => {
    let now = 0;
    const timer = new StepTimer(2, () => now);
    timer.stepStarted(0);
    now = 1500;
    timer.rolloutDone(0);
    t.equal(timer.rolloutDone(0), 2);
    now = 4000;
    timer.trainStarted(0);
    timer.trainDone(0, 2.5, 900);
    t.same(timer.timing(0), { rolloutSeconds: 1.5, trainSeconds: 2.5, tokensPerSecond: 900 });
    timer.stepStarted(1);
    now = 6000;
    timer.trainStarted(1); // a resumed step: its rollouts came from the log
    t.equal(timer.timing(1), undefined, 'not trained yet');
    timer.trainDone(1, 1, 1);
    t.equal(timer.timing(1)?.rolloutSeconds, 2);
    timer.forget(0);
    t.equal(timer.timing(0), undefined);
  },
);

t.test(
  'run setup: the response limit is cut to the context and recorded with the tools and index',
  async (t) => {
    const q = {
      id: 'q1',
      gold: ['x'],
      text: 'q',
      split: 'train/single',
      withToolPrompt: [1, 2, 3],
      noToolPrompt: [1, 2],
    };
    const s = runSetup({
      spec: {
        train: validateTrainConfig({ maxResponseTokens: 100, seed: 5 }),
        worldDir: 'w',
        basePolicy: 'b',
        topK: 3,
      },
      questions: [q],
      context: 64,
      padId: 0,
      tools: [searchTool()],
      index: { dir: 'w/index', fingerprint: 'lexical(f)' },
      resume: { step: 1, version: 2, lastCategory: { q1: 'efficiency' } },
      akbeVersion: '9.9.9',
    });
    t.equal(s.maxResponseTokens, 61, 'context 64 - longest prompt 3');
    t.match(s.note, /maxResponseTokens 100 -> 61/);
    t.has(s.runStarted.config, {
      maxResponseTokens: 61,
      configuredMaxResponseTokens: 100,
      tools: ['search'],
      toolTags: ['search'],
      indexFingerprint: 'lexical(f)',
    });
    t.same(s.machineInput.limits, { toolTags: ['search'], maxToolCalls: 6, maxResponseTokens: 61 });
    t.same([s.machineInput.initialStep, s.machineInput.initialVersion], [2, 2]);
    t.same(s.machineInput.learner.initialLastCategory, { q1: 'efficiency' });
    t.equal(s.spec.indexFingerprint, 'lexical(f)');
  },
);

t.test(
  'oracle rates: per step, from the groups the learner kept, only when there is an oracle',
  async (t) => {
    const spec = (id: string, known?: boolean) => ({
      id,
      gold: ['x'],
      known,
      withToolPrompt: [1],
      noToolPrompt: [1],
    });
    const o = new OracleRates([spec('k', true), spec('u', false), spec('n')]);
    const done = (g: ReturnType<typeof group>) => o.see({ type: 'group.completed', group: g });
    done(group('k', [1, 1], [1], { wtCalls: [1, 0], step: 0 })); // known: 1 of 2 searched
    done(group('u', [0, 0], [0], { wtCalls: [0, 0], step: 0 })); // unknown: 2 of 2 did not
    done(group('n', [0], [0], { wtCalls: [5], step: 0 })); // no oracle
    done(group('k', [1], [1], { wtCalls: [4], step: 1 })); // known, step 1: 1 of 1
    done(group('u', [0], [0], { wtCalls: [0], step: 1, version: 7 }));
    o.see({ type: 'group.discarded', questionId: 'u', policyVersion: 7, expectedVersion: 1 });
    t.same(o.extra(0), { knownSearchRate: 0.5, unknownNoSearchRate: 1 });
    t.same(o.extra(1), { knownSearchRate: 1 }, 'the discarded group is not counted');
    o.forget(0);
    t.same(o.extra(0), {}, 'a forgotten step has nothing left');
    const none = new OracleRates([spec('n')]);
    none.see({ type: 'group.completed', group: group('n', [1], [1], { wtCalls: [1] }) });
    t.notOk(none.hasOracle);
    t.same(none.extra(0), {}, 'questions without an oracle: no keys');
  },
);
