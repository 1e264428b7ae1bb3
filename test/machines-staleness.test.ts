/**
 * Bounded staleness (maxStaleness η >= 1, issue 13 item 1): the run machine opens step j as soon as
 * version max(0, j - η) is published, so step j+1 rolls out while step j trains; the learner trains
 * the steps in order and never a group more than η versions behind the version it trains from; a
 * group that is too stale (or of a step already trained) is dropped and recorded with its reason.
 */
import t from 'tap';
import { createActor, fromPromise, toPromise, waitFor } from 'xstate';
import type { AkbeFact, LearnerFact } from '../src/machines/facts.js';
import {
  type LearnerInput,
  learnerMachine,
  StaleStepError,
  type TrainRequest,
  type TrainResult,
} from '../src/machines/learner.js';
import type { QuestionSpec } from '../src/machines/question.js';
import { questionMachine } from '../src/machines/question.js';
import { rolloutMachine } from '../src/machines/rollout.js';
import { type RunInput, runMachine } from '../src/machines/run.js';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';
import { group } from './helpers/rollouts.js';
import { fakeSearch, type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './helpers/scripted-policy.js';

type LearnerStep = Extract<LearnerFact, { type: 'learner.step' }>;
type Discarded = Extract<LearnerFact, { type: 'group.discarded' }>;

/** A run of 4 steps whose training takes `trainMs` (generation is instant): the order of events. */
function runWith(maxStaleness: number, trainMs: number) {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const order: string[] = [];
  const requests: TrainRequest[] = [];
  const generate = scriptedGenerate(tok, calls, (req) => {
    order.push(`gen ${req.rolloutId} v${req.policyVersion}`);
    if (req.path === 'no-tool') return '<answer> paris </answer>';
    return req.turn === 0 ? '<search> capital </search>' : '<answer> paris </answer>';
  });
  const machine = runMachine.provide({
    actors: {
      question: questionMachine.provide({
        actors: {
          rollout: rolloutMachine.provide({ actors: { generate, callTool: fakeSearch(tok, calls) } }),
        },
      }),
      learner: learnerMachine.provide({
        actors: {
          train: fromPromise<TrainResult, TrainRequest>(async ({ input }) => {
            requests.push(input);
            order.push(`train-start s${input.step} v${input.policyVersion}`);
            await new Promise((r) => setTimeout(r, trainMs));
            order.push(`train-end v${input.policyVersion + 1}`);
            return { version: input.policyVersion + 1, metrics: {} };
          }),
        },
      }),
    },
  });
  const questions: QuestionSpec[] = Array.from({ length: 5 }, (_, i) => ({
    id: `q${i}`,
    gold: ['Paris'],
    withToolPrompt: tok.encode(`WT q${i} ?`),
    noToolPrompt: tok.encode(`NT q${i} ?`),
  }));
  const input: RunInput = {
    runSeed: 3,
    steps: 4,
    questions,
    batchQuestions: 2,
    gWithTool: 2,
    gNoTool: 1,
    limits: { maxToolCalls: 2, maxResponseTokens: 64 },
    maxStaleness,
    learner: {
      miniBatchQuestions: 1,
      algo: 'akbe',
      advantage: 'grpo',
      targetSelection: 'min-tool-calls',
      targetContext: 'with-tool',
      losses: lossTermsFor(DEFAULT_TRAIN_CONFIG),
    },
  };
  const actor = createActor(machine, { input });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  return { actor, facts, order, calls, requests };
}

const stepOf = (rolloutId: string) => Number(rolloutId.slice(1, rolloutId.indexOf('.')));

for (const eta of [1, 2]) {
  t.test(`η ${eta}: step j rolls out on v max(0, j - η) while earlier steps train`, async (t) => {
    const { actor, facts, order, calls, requests } = runWith(eta, 20);
    actor.start();
    t.same(await toPromise(actor), { steps: 4, policyVersion: 4 });
    t.same(Object.keys(actor.getSnapshot().children), ['learner'], 'finished question actors are released');
    for (const c of calls.generate)
      t.equal(c.policyVersion, Math.max(0, stepOf(c.rolloutId) - eta), `${c.rolloutId} version`);
    t.same(
      requests.map((r) => [r.step, r.policyVersion]),
      [0, 1, 2, 3].map((j) => [j, j]),
      'steps train in order, step j from version j',
    );
    // Overlap: step 1's rollouts all ran before step 0's training ended (generation is instant).
    const step0Trained = order.indexOf('train-end v1');
    const lastStep1Gen = order.findLastIndex((o) => o.startsWith('gen s1.'));
    t.ok(lastStep1Gen >= 0 && lastStep1Gen < step0Trained, 'step 1 rolled out while step 0 trained');
    const steps = facts.filter((f): f is LearnerStep => f.type === 'learner.step');
    t.same(
      steps.map((s) => [s.step, s.policyVersion, s.trainVersion, s.dropped]),
      [0, 1, 2, 3].map((j) => [j, Math.max(0, j - eta), j, []]),
      'learner.step: the rollout version, the trained-from version, no drops',
    );
    for (const s of steps) t.ok(s.trainVersion! - s.policyVersion <= eta, `step ${s.step} within η`);
    t.ok(
      steps.some((s) => s.trainVersion! - s.policyVersion === eta),
      'some step really trained on stale rows',
    );
    const labels = facts.filter((f) => f.type === 'boundary.labeled');
    for (const l of labels)
      t.equal(l.policyVersion, Math.max(0, l.step - eta), `boundary.labeled s${l.step} names its version`);
    const started = facts.filter((f) => f.type === 'step.started');
    t.same(
      started.map((s) => [s.step, s.policyVersion]),
      [0, 1, 2, 3].map((j) => [j, Math.max(0, j - eta)]),
    );
    t.equal(facts.filter((f) => f.type === 'group.discarded').length, 0);
  });
}

t.test('η 0 through the same machine: strictly synchronous, no async fields', async (t) => {
  const { actor, facts, order } = runWith(0, 5);
  actor.start();
  await toPromise(actor);
  for (let k = 1; k < 4; k++)
    t.ok(
      order.findIndex((o) => o.startsWith(`gen s${k}.`)) > order.indexOf(`train-end v${k}`),
      `step ${k} starts after v${k}`,
    );
  const steps = facts.filter((f): f is LearnerStep => f.type === 'learner.step');
  t.ok(steps.every((s) => !('trainVersion' in s) && !('dropped' in s)));
});

const learnerInput: LearnerInput = {
  runSeed: 5,
  batchQuestions: 2,
  miniBatchQuestions: 1,
  algo: 'akbe',
  advantage: 'grpo',
  targetSelection: 'min-tool-calls',
  targetContext: 'with-tool',
  losses: lossTermsFor(DEFAULT_TRAIN_CONFIG),
  initialVersion: 0,
  maxStaleness: 1,
};

function startLearner() {
  const requests: TrainRequest[] = [];
  let release: () => void = () => {};
  const machine = learnerMachine.provide({
    actors: {
      train: fromPromise<TrainResult, TrainRequest>(async ({ input }) => {
        requests.push(input);
        await new Promise<void>((r) => {
          release = r;
        });
        return { version: input.policyVersion + 1, metrics: {} };
      }),
    },
  });
  const actor = createActor(machine, { input: learnerInput });
  const facts: AkbeFact[] = [];
  const errors: unknown[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  actor.subscribe({ error: (e) => errors.push(e) });
  actor.start();
  return { actor, facts, requests, errors, release: () => release() };
}

t.test(
  'learner, η 1: groups of later steps wait; too-stale and late groups are dropped and recorded',
  async (t) => {
    const { actor, facts, requests, release } = startLearner();
    const send = (g: ReturnType<typeof group>) => actor.send({ type: 'group.completed', group: g });
    // Step 1's groups (v0) arrive before step 0's: they wait for step 0.
    send(group('C', [1, 0], [0], { step: 1, version: 0 }));
    send(group('A', [1, 0], [0], { step: 0, version: 0 }));
    t.equal(requests.length, 0, 'one group of step 0 is not a batch');
    send(group('B', [0, 1], [1], { step: 0, version: 0 }));
    await waitFor(actor, (s) => s.matches('training'));
    t.same(
      requests[0].batch.rowInfo.map((r) => r.rolloutId.split('.')[0]).sort(),
      ['A', 'A', 'B', 'B', 'B'].sort(),
      "step 0's batch holds only step 0's groups",
    );
    // While step 0 trains: step 2 rolled out on v0 would be 2 versions behind v2: too stale.
    send(group('E', [1, 1], [0], { step: 2, version: 0 }));
    send(group('D', [1, 0], [1], { step: 1, version: 0 }));
    release();
    await waitFor(actor, (s) => s.context.version === 1 && s.matches('training'));
    t.equal(requests[1].step, 1);
    t.equal(requests[1].policyVersion, 1, 'step 1 trains from v1 on v0 rows (1 behind)');
    // A group of step 0 arriving after it trained (a duplicate): dropped, step-trained.
    send(group('A', [1, 0], [0], { step: 0, version: 0 }));
    send(group('F', [1, 0], [0], { step: 2, version: 1 }));
    release();
    await waitFor(actor, (s) => s.context.version === 2 && s.matches('training'));
    t.same(
      requests[2].batch.rowInfo.map((r) => r.rolloutId.split('.')[0]),
      ['F', 'F'],
      "step 2 trains on its one group within η (E's rows are not in it)",
    );
    release();
    await waitFor(actor, (s) => s.context.version === 3);
    const discarded = facts.filter((f): f is Discarded => f.type === 'group.discarded');
    t.same(
      discarded.map((d) => [d.questionId, d.step, d.policyVersion, d.expectedVersion, d.reason]),
      [
        ['E', 2, 0, 2, 'too-stale'],
        ['A', 0, 0, 0, 'step-trained'],
      ],
    );
    const steps = facts.filter((f): f is LearnerStep => f.type === 'learner.step');
    t.same(
      steps.map((s) => [s.step, s.policyVersion, s.trainVersion, s.dropped?.map((d) => d.questionId)]),
      [
        [0, 0, 0, []],
        [1, 0, 1, []],
        [2, 1, 2, ['E']],
      ],
      "the too-stale group is listed in its step's learner.step",
    );
    t.same(steps[2].dropped![0], {
      questionId: 'E',
      step: 2,
      policyVersion: 0,
      trainVersion: 2,
      reason: 'too-stale',
    });
  },
);

t.test('learner, η 1: a step whose every group is too stale fails, naming them', async (t) => {
  const { actor, errors, release } = startLearner();
  const send = (g: ReturnType<typeof group>) => actor.send({ type: 'group.completed', group: g });
  send(group('A', [1], [0], { step: 0, version: 0 }));
  send(group('B', [1], [0], { step: 0, version: 0 }));
  send(group('C', [1], [0], { step: 2, version: 0 }));
  send(group('D', [1], [0], { step: 2, version: 0 }));
  send(group('E', [1], [0], { step: 1, version: 0 }));
  send(group('F', [1], [0], { step: 1, version: 0 }));
  release();
  await waitFor(actor, (s) => s.context.version === 1 && s.matches('training'));
  release();
  await new Promise((r) => setTimeout(r, 20));
  t.equal(errors.length, 1);
  t.type(errors[0], StaleStepError);
  t.match((errors[0] as Error).message, /step 2 has no group within maxStaleness \(2 dropped: C v0, D v0\)/);
});
