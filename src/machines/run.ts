/**
 * The run machine: training steps 0..N-1, strictly on-policy.
 *
 *   stepping(k) ──B groups forwarded to the learner──► awaitingPolicy ──policy.published k+1──► stepping(k+1) … done
 *
 * Step k samples B distinct questions (seeded: deriveSeed(runSeed, 'questions', step)), spawns one
 * question machine per question with policyVersion = k's version, and forwards each finished
 * group to the learner (a child spawned at start). Step k+1 starts only when the learner has
 * published version k+1, so every rollout of step k comes from policy version k. Evaluation,
 * checkpoints and progress bars belong to the caller (`akbe train`), which listens to the facts.
 */
import { assign, enqueueActions, setup } from 'xstate';
import type { QuestionGroup } from '../rl/types.js';
import { deriveSeed, Rng } from '../util/rng.js';
import { type AkbeFact, type FactEvent, type RunFact, reportFact } from './facts.js';
import { type LearnerInput, learnerMachine } from './learner.js';
import { type QuestionSpec, questionMachine } from './question.js';
import type { RolloutLimits } from './rollout.js';

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
  learner: Omit<LearnerInput, 'runSeed' | 'batchQuestions' | 'initialVersion'>;
  /** Version of the initial policy (0 for a fresh run). */
  initialVersion?: number;
  /** First step to run (a resumed run starts after its last published step; default 0). */
  initialStep?: number;
}

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
  step: number;
  policyVersion: number;
  pending: string[];
}

type QuestionDone = { type: `xstate.done.actor.${string}`; output: QuestionGroup; actorId: string };
type RunEvent = FactEvent | QuestionDone | { type: 'policy.published'; version: number; step: number };

const questionActorId = (step: number, questionId: string) => `question.s${step}.${questionId}`;

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
  },
  guards: {
    'stepRolledOut?': ({ context }) => context.pending.length === 0,
    'isNextVersion?': ({ context, event }) =>
      event.type === 'policy.published' && event.version === context.policyVersion + 1,
    'moreSteps?': ({ context }) => context.step < context.steps,
  },
}).createMachine({
  id: 'run',
  context: ({ input }) => ({
    ...input,
    step: input.initialStep ?? 0,
    policyVersion: input.initialVersion ?? 0,
    pending: [],
  }),
  entry: enqueueActions(({ enqueue, context }) => {
    enqueue.spawnChild('learner', {
      id: 'learner',
      input: {
        ...context.learner,
        runSeed: context.runSeed,
        batchQuestions: context.batchQuestions,
        initialVersion: context.policyVersion,
      },
    });
  }),
  on: { fact: { actions: 'relay' } },
  initial: 'stepping',
  states: {
    stepping: {
      entry: enqueueActions(({ enqueue, context: c }) => {
        const chosen = sampleStepQuestions(c.questions.length, c.batchQuestions, c.runSeed, c.step).map(
          (i) => c.questions[i],
        );
        enqueue.assign({ pending: chosen.map((q) => questionActorId(c.step, q.id)) });
        enqueue({
          type: 'report',
          params: {
            type: 'step.started',
            step: c.step,
            policyVersion: c.policyVersion,
            questionIds: chosen.map((q) => q.id),
            seed: deriveSeed(c.runSeed, 'questions', c.step),
          } satisfies RunFact,
        });
        for (const question of chosen) {
          enqueue.spawnChild('question', {
            id: questionActorId(c.step, question.id),
            input: {
              runSeed: c.runSeed,
              step: c.step,
              policyVersion: c.policyVersion,
              question,
              gWithTool: c.gWithTool,
              gNoTool: c.gNoTool,
              limits: c.limits,
              sampling: c.sampling,
            },
          });
        }
      }),
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
      },
      always: { guard: 'stepRolledOut?', target: 'awaitingPolicy' },
    },
    awaitingPolicy: {
      on: {
        'policy.published': {
          guard: 'isNextVersion?',
          target: 'nextStep',
          actions: assign(({ context, event }) => ({
            policyVersion: (event as { version: number }).version,
            step: context.step + 1,
          })),
        },
      },
    },
    nextStep: {
      always: [{ guard: 'moreSteps?', target: 'stepping' }, { target: 'done' }],
    },
    done: {
      type: 'final',
      entry: {
        type: 'report',
        params: ({ context }) =>
          ({
            type: 'run.finished',
            steps: context.step,
            policyVersion: context.policyVersion,
          }) satisfies RunFact,
      },
    },
  },
  output: ({ context }) => ({ steps: context.step, policyVersion: context.policyVersion }),
});
