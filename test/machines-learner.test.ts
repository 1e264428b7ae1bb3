import t from 'tap';
import { createActor, fromPromise, initialTransition, transition, waitFor } from 'xstate';
import type { AkbeFact, LearnerFact } from '../src/machines/facts.js';
import {
  type LearnerInput,
  learnerMachine,
  type TrainRequest,
  type TrainResult,
} from '../src/machines/learner.js';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';
import { group } from './helpers/rollouts.js';

const input: LearnerInput = {
  runSeed: 5,
  batchQuestions: 3,
  miniBatchQuestions: 2,
  algo: 'akbe',
  advantage: 'grpo',
  targetSelection: 'min-tool-calls',
  targetContext: 'with-tool',
  losses: lossTermsFor(DEFAULT_TRAIN_CONFIG),
  initialVersion: 0,
};

// Step 0, version 0: A tool-dependent (correct wt0 with 2 calls, wt2 with 1), B efficiency, C both-wrong.
const step0 = [
  group('A', [1, 0, 1], [0, 0], { wtCalls: [2, 1, 1] }),
  group('B', [1, 0], [0, 1]),
  group('C', [0, 0], [0, 0]),
];

function start(train: (req: TrainRequest) => Promise<TrainResult>) {
  const requests: TrainRequest[] = [];
  const machine = learnerMachine.provide({
    actors: {
      train: fromPromise<TrainResult, TrainRequest>(async ({ input }) => {
        requests.push(input);
        return train(input);
      }),
    },
  });
  const actor = createActor(machine, { input });
  const facts: AkbeFact[] = [];
  actor.on('*', (f) => facts.push(f as AkbeFact));
  actor.start();
  return { actor, facts, requests };
}

const nextVersion = async (req: TrainRequest): Promise<TrainResult> => ({
  version: req.policyVersion + 1,
  metrics: { loss: 0.5 },
});

t.test('labels, targets, batch and facts on a scripted step; stale groups are discarded', async (t) => {
  const { actor, facts, requests } = start(nextVersion);
  actor.send({ type: 'group.completed', group: group('Z', [1], [1], { version: 4 }) });
  for (const g of step0) actor.send({ type: 'group.completed', group: g });
  await waitFor(actor, (s) => s.context.version === 1);
  const labeled = facts.filter(
    (f): f is Extract<LearnerFact, { type: 'boundary.labeled' }> => f.type === 'boundary.labeled',
  );
  const byQ = Object.fromEntries(labeled.map((f) => [f.label.questionId, f]));
  t.same(
    Object.fromEntries(
      Object.entries(byQ).map(([q, f]) => [
        q,
        [f.label.category, f.label.target?.rolloutId ?? null, f.selectionRule],
      ]),
    ),
    {
      A: ['tool-dependent', 'A.wt2', 'min-tool-calls'],
      B: ['efficiency', 'B.nt1', 'random-correct-no-tool'],
      C: ['both-wrong', null, 'none'],
    },
  );
  t.ok(labeled.every((f) => f.previousCategory === null && f.step === 0 && f.policyVersion === 0));
  t.equal(requests.length, 1);
  const { batch } = requests[0];
  t.equal(batch.rows, 3 + 3 + 2, 'every with-tool rollout plus the re-conditioned no-tool target of B');
  t.equal(Array.from(batch.akbeWeight).filter((w) => w > 0).length, 2, 'two target rows (A and B)');
  t.equal(
    Array.from(batch.recomputeOld).reduce((a, b) => a + b),
    1,
  );
  t.equal(batch.miniBatches.length, 2, '3 questions in mini-batches of 2');
  t.same(
    requests[0].losses.map((l) => l.name),
    ['grpo', 'akbe-nll'],
  );
  const types = facts.map((f) => f.type);
  t.same(types, [
    'group.discarded',
    'boundary.labeled',
    'boundary.labeled',
    'boundary.labeled',
    'learner.step',
    'policy.published',
  ]);
  const step = facts.find((f) => f.type === 'learner.step') as Extract<LearnerFact, { type: 'learner.step' }>;
  t.same(step.stepMetrics.categories, {
    'tool-dependent': 1,
    efficiency: 1,
    hallucination: 0,
    'both-wrong': 1,
  });
  t.same(step.trainMetrics, { loss: 0.5 });
  t.same(facts.at(-1), { type: 'policy.published', step: 0, version: 1, checkpoint: undefined });

  // Step 1 under version 1: A moves to efficiency -> one boundary shift, with its previous category.
  facts.length = 0;
  for (const g of [
    group('A', [1, 0], [1, 0], { step: 1, version: 1 }),
    group('B', [1, 0], [0, 1], { step: 1, version: 1 }),
    group('C', [0], [0], { step: 1, version: 1 }),
  ]) {
    actor.send({ type: 'group.completed', group: g });
  }
  await waitFor(actor, (s) => s.context.version === 2);
  const a = facts.find((f) => f.type === 'boundary.labeled' && f.label.questionId === 'A') as Extract<
    LearnerFact,
    { type: 'boundary.labeled' }
  >;
  t.same([a.previousCategory, a.label.category], ['tool-dependent', 'efficiency']);
  const step1 = facts.find((f) => f.type === 'learner.step') as Extract<
    LearnerFact,
    { type: 'learner.step' }
  >;
  t.equal(step1.stepMetrics.boundaryShifts, 1);
  t.equal(requests[1].policyVersion, 1);
});

t.test('collecting is a pure transition: the B-th group moves the learner to training', async (t) => {
  let [snap] = initialTransition(learnerMachine, input);
  [snap] = transition(learnerMachine, snap, { type: 'group.completed', group: step0[0] });
  [snap] = transition(learnerMachine, snap, { type: 'group.completed', group: step0[1] });
  t.equal(snap.value, 'collecting');
  const [next, actions] = transition(learnerMachine, snap, { type: 'group.completed', group: step0[2] });
  t.equal(next.value, 'training');
  t.equal(next.context.prepared?.labels.length, 3);
  t.ok(
    actions.some((a) => a.type === 'xstate.spawnChild'),
    'the train actor is started, not run, by transition()',
  );
});

t.test('a trainer that publishes the wrong version fails the learner', async (t) => {
  const { actor } = start(async (req) => ({ version: req.policyVersion + 2, metrics: {} }));
  const failed = new Promise<unknown>((resolve) => actor.subscribe({ error: resolve }));
  for (const g of step0) actor.send({ type: 'group.completed', group: g });
  t.match(await failed, { name: 'PolicyVersionError', expected: 1, got: 2 });
});
