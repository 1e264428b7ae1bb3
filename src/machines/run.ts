/**
 * The run machine: training steps 0..N-1, with up to `maxStaleness` (η) steps of rollouts ahead
 * of training.
 *
 *   running: open every step whose rollout version is published ─► forward finished groups to the
 *            learner ─► policy.published v+1 opens the next step(s) ─► … ─► done (every step trained)
 *
 * Step j rolls out with version rolloutVersionOf(j, η) = base + max(0, j - η) (base: the run's
 * first version, 0), and opens as soon as that version is published: it samples B distinct
 * questions (seeded: deriveSeed(runSeed, 'questions', j)) and spawns one question machine per
 * question at that version (both paths of a question come from one version). The learner (a child
 * spawned at start) trains the steps in order, step j from version base + j; so step j's rows are
 * min(j - base, η) versions old, never more than η. This is AReaL's admission rule (a batch may
 * start while its index is at most the newest version + η), and it makes a step's version a
 * function of its index: a run is reproducible, and a resumed run reopens a step on the version it
 * first had. η = 0 is the paper's synchronous loop: step j+1 opens when step j has published j+1.
 * Evaluation, checkpoints and progress bars belong to the caller (`akbe train`), which listens to
 * the facts.
 */
import { assign, enqueueActions, setup } from 'xstate';
import { rolloutVersionOf } from '../rl/staleness.js';
import type { QuestionGroup } from '../rl/types.js';
import { deriveSeed, Rng } from '../util/rng.js';
import { type AkbeFact, type FactEvent, type RunFact, reportFact } from './facts.js';
import { type LearnerInput, learnerMachine } from './learner.js';
import { type QuestionSpec, questionMachine } from './question.js';
import type { RolloutLimits } from './rollout.js';

/** A run's shape for the run machine: steps, questions per step, group sizes, staleness, seeds. */
export interface RunInput {
  runSeed: number;
  steps: number;
  /** The training question pool. */
  questions: QuestionSpec[];
  batchQuestions: number;
  gWithTool: number;
  gNoTool: number;
  limits: RolloutLimits;
  sampling?: { temperature: number; topP: number };
  /** The learner's settings (runSeed, batchQuestions and initialVersion are taken from here). */
  learner: Omit<
    LearnerInput,
    'runSeed' | 'batchQuestions' | 'initialVersion' | 'initialStep' | 'maxStaleness'
  >;
  /** Version of the initial policy (0 for a fresh run). */
  initialVersion?: number;
  /** First step to run (a resumed run starts after its last published step; default 0). */
  initialStep?: number;
  /** η: how many versions a step's rollouts may lag the version it trains from (default 0). */
  maxStaleness?: number;
}

/** How far a run got: steps completed and the last policy version. */
export interface RunOutput {
  steps: number;
  policyVersion: number;
}

/** Indices of the B distinct questions of a step: a seeded partial Fisher-Yates draw. Pure. */
export function sampleStepQuestions(
  poolSize: number,
  batch: number,
  runSeed: number,
  step: number,
): number[] {
  if (batch > poolSize)
    throw new RangeError(`a step needs ${batch} distinct questions but the pool has ${poolSize}`);
  const rng = new Rng(deriveSeed(runSeed, 'questions', step));
  const idx = Array.from({ length: poolSize }, (_, i) => i);
  for (let i = 0; i < batch; i++) {
    const j = i + rng.int(poolSize - i);
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx.slice(0, batch);
}

export interface RunContext extends RunInput {
  /** The next step to open (sample its questions, spawn them). */
  step: number;
  /** The next step to train (all before it have published their versions). */
  trainStep: number;
  /** The newest published version. */
  policyVersion: number;
  /** The run's first version (initialVersion - initialStep: 0 for every run so far). */
  baseVersion: number;
  /** Question actors of the open steps that have not finished. */
  pending: string[];
}

type QuestionDone = { type: `xstate.done.actor.${string}`; output: QuestionGroup; actorId: string };
type RunEvent = FactEvent | QuestionDone | { type: 'policy.published'; version: number; step: number };

const questionActorId = (step: number, questionId: string) => `question.s${step}.${questionId}`;

/** The run: opens each step (synchronously, or up to maxStaleness ahead), spawns its question actors and the learner. */
export const runMachine = setup({
  types: {
    input: {} as RunInput,
    context: {} as RunContext,
    output: {} as RunOutput,
    events: {} as RunEvent,
    emitted: {} as AkbeFact,
  },
  actors: { question: questionMachine, learner: learnerMachine },
  actions: {
    report: reportFact<AkbeFact>(),
    relay: enqueueActions(({ enqueue, event }) => {
      if (event.type === 'fact') enqueue({ type: 'report', params: (event as FactEvent).fact });
    }),
    /** Opens every step whose rollout version is published (one at a time at η = 0). */
    openSteps: enqueueActions(({ enqueue, context: c }) => {
      const eta = c.maxStaleness ?? 0;
      let step = c.step;
      const pending = [...c.pending];
      while (step < c.steps && rolloutVersionOf(step, eta, c.baseVersion) <= c.policyVersion) {
        const policyVersion = rolloutVersionOf(step, eta, c.baseVersion);
        const chosen = sampleStepQuestions(c.questions.length, c.batchQuestions, c.runSeed, step).map(
          (i) => c.questions[i],
        );
        pending.push(...chosen.map((q) => questionActorId(step, q.id)));
        enqueue({
          type: 'report',
          params: {
            type: 'step.started',
            step,
            policyVersion,
            questionIds: chosen.map((q) => q.id),
            seed: deriveSeed(c.runSeed, 'questions', step),
          } satisfies RunFact,
        });
        for (const question of chosen) {
          enqueue.spawnChild('question', {
            id: questionActorId(step, question.id),
            input: {
              runSeed: c.runSeed,
              step,
              policyVersion,
              question,
              gWithTool: c.gWithTool,
              gNoTool: c.gNoTool,
              limits: c.limits,
              sampling: c.sampling,
            },
          });
        }
        step++;
      }
      if (step !== c.step) enqueue.assign({ step, pending });
    }),
  },
  guards: {
    'isNextVersion?': ({ context, event }) =>
      event.type === 'policy.published' && event.version === context.policyVersion + 1,
    'allTrained?': ({ context }) => context.trainStep >= context.steps,
  },
}).createMachine({
  id: 'run',
  context: ({ input }) => {
    const step = input.initialStep ?? 0;
    const policyVersion = input.initialVersion ?? 0;
    return { ...input, step, trainStep: step, policyVersion, baseVersion: policyVersion - step, pending: [] };
  },
  entry: enqueueActions(({ enqueue, context }) => {
    enqueue.spawnChild('learner', {
      id: 'learner',
      input: {
        ...context.learner,
        runSeed: context.runSeed,
        batchQuestions: context.batchQuestions,
        initialVersion: context.policyVersion,
        initialStep: context.trainStep,
        maxStaleness: context.maxStaleness ?? 0,
      },
    });
  }),
  on: { fact: { actions: 'relay' } },
  initial: 'running',
  states: {
    running: {
      entry: 'openSteps',
      on: {
        'xstate.done.actor.*': {
          actions: enqueueActions(({ enqueue, context, event }) => {
            const { actorId, output } = event as QuestionDone;
            if (!context.pending.includes(actorId)) return;
            enqueue.assign({ pending: context.pending.filter((id) => id !== actorId) });
            enqueue.sendTo('learner', { type: 'group.completed', group: output });
            // A finished child stays in snapshot.children until stopped: a long run would keep them all.
            enqueue.stopChild(actorId);
          }),
        },
        'policy.published': {
          guard: 'isNextVersion?',
          actions: [
            assign(({ context, event }) => ({
              policyVersion: (event as { version: number }).version,
              trainStep: context.trainStep + 1,
            })),
            'openSteps',
          ],
        },
      },
      always: { guard: 'allTrained?', target: 'done' },
    },
    done: {
      type: 'final',
      entry: {
        type: 'report',
        params: ({ context }) =>
          ({
            type: 'run.finished',
            steps: context.trainStep,
            policyVersion: context.policyVersion,
          }) satisfies RunFact,
      },
    },
  },
  output: ({ context }) => ({ steps: context.trainStep, policyVersion: context.policyVersion }),
});
