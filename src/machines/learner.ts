/**
 * The learner machine: a long-lived actor that consumes `group.completed` groups of the current
 * policy version k, and once it has B of them takes one training step:
 *
 *   collecting ──B groups──► training (invoke `train`) ──new version──► collecting (version k+1)
 *
 * Between the two it is pure (src/rl): labels every question's knowledge boundary and picks its
 * target, computes GRPO advantages over each with-tool group, assembles the batch (masks,
 * old logprobs, loss weights, mini-batches), and measures the step (category counts, boundary
 * shifts since each question's previous label). Facts: one `boundary.labeled` per question,
 * `learner.step`, then `policy.published`; the parent (the run machine) also receives
 * `{ type: 'policy.published', version }`.
 *
 * The `train` actor is injected (the trainer service: a gradient step on the batch, then the new
 * policy version saved and published). Questions are ordered by id and then shuffled with
 * deriveSeed(runSeed, 'minibatch', step) before the mini-batch split, so the batch does not depend
 * on the order in which groups finished.
 */
import { assign, enqueueActions, fromPromise, setup } from 'xstate';
import { getAdvantage } from '../rl/advantages.js';
import { assembleBatch, type BatchQuestion, type TrainBatch } from '../rl/batch.js';
import { labelBoundary } from '../rl/boundary.js';
import type { LossTerm } from '../rl/losses.js';
import { boundaryShifts, type StepMetrics, stepMetrics } from '../rl/metrics.js';
import type {
  BoundaryCategory,
  BoundaryLabel,
  QuestionGroup,
  TargetContext,
  TargetSelection,
} from '../rl/types.js';
import { deriveSeed, Rng } from '../util/rng.js';
import { type AkbeFact, type LearnerFact, reportFact } from './facts.js';

/** The trainer published a version other than the one after the batch's version. */
export class PolicyVersionError extends Error {
  constructor(
    readonly expected: number,
    readonly got: number,
    opts?: ErrorOptions,
  ) {
    super(
      `learner: the trainer published version ${got}, expected ${expected} (one past the batch's rollout version)`,
      opts,
    );
    this.name = 'PolicyVersionError';
  }
}

export interface LearnerInput {
  runSeed: number;
  /** B: groups per training step. */
  batchQuestions: number;
  miniBatchQuestions: number;
  algo: 'grpo' | 'akbe';
  /** Advantage estimator name (src/rl/advantages registry). */
  advantage: string;
  targetSelection: TargetSelection;
  targetContext: TargetContext;
  /** The loss terms to train with (src/rl/losses `lossTermsFor(config)`). */
  losses: LossTerm[];
  /** Version the first groups are expected from (0 for a fresh run). */
  initialVersion: number;
  /** Each question's latest category before this learner started (a resumed run's log). */
  initialLastCategory?: Record<string, BoundaryCategory>;
  padId?: number;
  padTo?: number;
}

export interface TrainRequest {
  step: number;
  /** pi_old: the version that produced every rollout of the batch. */
  policyVersion: number;
  batch: TrainBatch;
  losses: LossTerm[];
}

export interface TrainResult {
  /** The published version: policyVersion + 1. */
  version: number;
  metrics: Record<string, number>;
  /** Where the checkpoint of the new version lives (object name or path). */
  checkpoint?: string;
}

/** Everything the learner computed for one step, before training. Pure. */
export interface PreparedStep {
  step: number;
  miniBatchSeed: number;
  policyVersion: number;
  groups: QuestionGroup[];
  labels: BoundaryLabel[];
  previous: Array<BoundaryCategory | null>;
  batch: TrainBatch;
  metrics: StepMetrics;
  lastCategory: Record<string, BoundaryCategory>;
}

/** Labels, advantages, batch and step metrics of B groups (all of one step and version). */
export function prepareStep(
  input: LearnerInput,
  groupsIn: readonly QuestionGroup[],
  lastCategory: Readonly<Record<string, BoundaryCategory>>,
): PreparedStep {
  const step = groupsIn[0].step;
  const policyVersion = groupsIn[0].policyVersion;
  const groups = [...groupsIn].sort((a, b) =>
    a.questionId < b.questionId ? -1 : a.questionId > b.questionId ? 1 : 0,
  );
  const miniBatchSeed = deriveSeed(input.runSeed, 'minibatch', step);
  new Rng(miniBatchSeed).shuffle(groups);
  const advantageFn = getAdvantage(input.advantage);
  const labels = groups.map((g) =>
    labelBoundary(g.withTool, g.noTool, {
      runSeed: input.runSeed,
      step,
      targetSelection: input.targetSelection,
      targetContext: input.targetContext,
    }),
  );
  const questions: BatchQuestion[] = groups.map((group, i) => ({
    group,
    label: labels[i],
    advantages: advantageFn(group.withTool.map((r) => r.reward)),
  }));
  const batch = assembleBatch(questions, {
    algo: input.algo,
    miniBatchQuestions: input.miniBatchQuestions,
    padId: input.padId,
    padTo: input.padTo,
  });
  const prevMap = new Map(Object.entries(lastCategory));
  const { shifts, latest } = boundaryShifts(prevMap, labels);
  return {
    step,
    miniBatchSeed,
    policyVersion,
    groups,
    labels,
    previous: labels.map((l) => prevMap.get(l.questionId) ?? null),
    batch,
    metrics: stepMetrics(groups, labels, shifts),
    lastCategory: Object.fromEntries(latest),
  };
}

export function selectionRuleOf(label: BoundaryLabel, targetSelection: TargetSelection): string {
  if (label.target === null) return 'none';
  return label.category === 'tool-dependent' ? targetSelection : 'random-correct-no-tool';
}

export interface LearnerContext {
  input: LearnerInput;
  version: number;
  groups: QuestionGroup[];
  prepared: PreparedStep | null;
  lastCategory: Record<string, BoundaryCategory>;
  stepsDone: number;
}

export type LearnerEvent = { type: 'group.completed'; group: QuestionGroup };

export const learnerMachine = setup({
  types: {
    input: {} as LearnerInput,
    context: {} as LearnerContext,
    events: {} as LearnerEvent,
    emitted: {} as AkbeFact,
  },
  actors: {
    train: fromPromise<TrainResult, TrainRequest>(async () => {
      throw new Error('learner machine: provide a `train` actor (the trainer service)');
    }),
  },
  actions: {
    report: reportFact<AkbeFact>(),
  },
  guards: {
    'isCurrentVersion?': ({ context, event }) => event.group.policyVersion === context.version,
    'batchFull?': ({ context }) => context.groups.length >= context.input.batchQuestions,
  },
}).createMachine({
  id: 'learner',
  context: ({ input }) => ({
    input,
    version: input.initialVersion,
    groups: [],
    prepared: null,
    lastCategory: { ...(input.initialLastCategory ?? {}) },
    stepsDone: 0,
  }),
  initial: 'collecting',
  states: {
    collecting: {
      on: {
        'group.completed': [
          {
            guard: 'isCurrentVersion?',
            actions: assign({ groups: ({ context, event }) => [...context.groups, event.group] }),
          },
          {
            actions: {
              type: 'report',
              params: ({ context, event }) =>
                ({
                  type: 'group.discarded',
                  questionId: event.group.questionId,
                  policyVersion: event.group.policyVersion,
                  expectedVersion: context.version,
                }) satisfies LearnerFact,
            },
          },
        ],
      },
      always: { guard: 'batchFull?', target: 'training' },
    },
    training: {
      entry: enqueueActions(({ enqueue, context }) => {
        const groups = context.groups.slice(0, context.input.batchQuestions);
        const prepared = prepareStep(context.input, groups, context.lastCategory);
        enqueue.assign({
          prepared,
          groups: context.groups.slice(context.input.batchQuestions),
          lastCategory: prepared.lastCategory,
        });
        prepared.labels.forEach((label, i) => {
          const fact: LearnerFact = {
            type: 'boundary.labeled',
            step: prepared.step,
            policyVersion: prepared.policyVersion,
            label,
            selectionRule: selectionRuleOf(label, context.input.targetSelection),
            previousCategory: prepared.previous[i],
          };
          enqueue({ type: 'report', params: fact });
        });
      }),
      invoke: {
        src: 'train',
        input: ({ context }) => ({
          step: context.prepared!.step,
          policyVersion: context.prepared!.policyVersion,
          batch: context.prepared!.batch,
          losses: context.input.losses,
        }),
        onDone: {
          target: 'collecting',
          actions: enqueueActions(({ enqueue, context, event, self }) => {
            const p = context.prepared!;
            const { version, metrics, checkpoint } = event.output;
            if (version !== p.policyVersion + 1) throw new PolicyVersionError(p.policyVersion + 1, version);
            enqueue.assign({ version, prepared: null, stepsDone: context.stepsDone + 1 });
            const b = p.batch;
            enqueue({
              type: 'report',
              params: {
                type: 'learner.step',
                step: p.step,
                policyVersion: p.policyVersion,
                stepMetrics: p.metrics,
                trainMetrics: metrics,
                batch: { rows: b.rows, T: b.T, lossTokens: b.lossTokens, miniBatches: b.miniBatches.length },
                miniBatchSeed: p.miniBatchSeed,
              } satisfies LearnerFact,
            });
            enqueue({
              type: 'report',
              params: { type: 'policy.published', step: p.step, version, checkpoint } satisfies LearnerFact,
            });
            if (self._parent)
              enqueue.sendTo(self._parent, { type: 'policy.published', version, step: p.step });
          }),
        },
      },
    },
  },
});
