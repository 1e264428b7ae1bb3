/**
 * The learner machine: a long-lived actor that consumes `group.completed` groups, and once it has
 * the B groups of its next step takes one training step:
 *
 *   collecting ──B groups──► training (invoke `train`) ──new version──► collecting (version k+1)
 *
 * Synchronous (maxStaleness 0, the paper): every group must come from the current version k; one
 * of another version is discarded (`group.discarded`). With maxStaleness η >= 1 groups of later
 * steps arrive while a step trains: the learner keeps them by step, trains the steps in order
 * (step j from version base + j), and drops a group whose version would be more than η behind the
 * version its step trains from, or whose step already trained; each drop is a `group.discarded`
 * with its reason and is listed in the step's `learner.step` (`dropped`), never silent.
 *
 * Between the two it is pure (prepare-step.ts over src/rl): labels every question's knowledge
 * boundary and picks its target, computes GRPO advantages over each with-tool group, assembles the batch (masks,
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
import { and, assign, enqueueActions, fromPromise, not, setup } from 'xstate';
import type { TrainBatch } from '../rl/batch.js';
import type { LossTerm } from '../rl/losses.js';
import type { BoundaryCategory, QuestionGroup } from '../rl/types.js';
import { type AkbeFact, type DroppedGroup, type DropReason, type LearnerFact, reportFact } from './facts.js';
import { type LearnerInput, type PreparedStep, prepareStep, selectionRuleOf } from './prepare-step.js';

// The step's pure preparation lives in prepare-step.ts; callers (the audit) import it from here too.
export { type LearnerInput, type PreparedStep, prepareStep, selectionRuleOf } from './prepare-step.js';
export type { DroppedGroup, DropReason };

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

/** What the learner asks the trainer for one step: the batch, the loss terms and the version it trains from. */
export interface TrainRequest {
  step: number;
  /**
   * The version the update starts from (pi_prox); synchronous runs: also the version that produced
   * every rollout of the batch (pi_old).
   */
  policyVersion: number;
  batch: TrainBatch;
  losses: LossTerm[];
}

/** The trainer's answer to a TrainRequest: the published version, the step's metrics and where its checkpoint lives. */
export interface TrainResult {
  /** The published version: policyVersion + 1. */
  version: number;
  metrics: Record<string, number>;
  /** Where the checkpoint of the new version lives (object name or path). */
  checkpoint?: string;
}

const etaOf = (c: { input: { maxStaleness?: number } }): number => c.input.maxStaleness ?? 0;

/** Every group of a step was too stale (maxStaleness >= 1): there is nothing to train on. */
export class StaleStepError extends Error {
  constructor(
    readonly step: number,
    readonly dropped: readonly DroppedGroup[],
  ) {
    super(
      `learner: step ${step} has no group within maxStaleness (${dropped.length} dropped: ${dropped.map((d) => `${d.questionId} v${d.policyVersion}`).join(', ')})`,
    );
    this.name = 'StaleStepError';
  }
}

/** The version `group`'s step trains from, and why it cannot be trained (null: it can). Pure. */
export function groupVerdict(
  group: Pick<QuestionGroup, 'step' | 'policyVersion'>,
  next: { step: number; version: number },
  maxStaleness: number,
): { trainVersion: number; reason: DropReason | null } {
  const trainVersion = next.version + (group.step - next.step);
  if (group.step < next.step) return { trainVersion, reason: 'step-trained' };
  return { trainVersion, reason: trainVersion - group.policyVersion > maxStaleness ? 'too-stale' : null };
}

export interface LearnerContext {
  input: LearnerInput;
  version: number;
  /** The next step to train. */
  step: number;
  /** Groups dropped for steps not trained yet (asynchronous runs). */
  dropped: DroppedGroup[];
  groups: QuestionGroup[];
  prepared: PreparedStep | null;
  lastCategory: Record<string, BoundaryCategory>;
  stepsDone: number;
}

/** The step the learner trains next and its version (while a step trains: the one after it). */
function nextToTrain(c: LearnerContext): { step: number; version: number } {
  return c.prepared ? { step: c.prepared.step + 1, version: c.version + 1 } : c;
}

export type LearnerEvent = { type: 'group.completed'; group: QuestionGroup };

/** The learner: collects a step's question groups, labels boundaries, picks targets, builds the train request and waits for the new version. */
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
    keepGroup: assign({ groups: ({ context, event }) => [...context.groups, event.group] }),
    dropGroup: enqueueActions(({ enqueue, context, event }) => {
      const g = event.group;
      const next = nextToTrain(context);
      const { trainVersion, reason } = groupVerdict(g, next, etaOf(context));
      const drop: DroppedGroup = {
        questionId: g.questionId,
        step: g.step,
        policyVersion: g.policyVersion,
        trainVersion,
        reason: reason ?? 'too-stale',
      };
      if (g.step >= next.step) enqueue.assign({ dropped: [...context.dropped, drop] });
      enqueue({
        type: 'report',
        params: {
          type: 'group.discarded',
          questionId: g.questionId,
          policyVersion: g.policyVersion,
          expectedVersion: trainVersion,
          step: g.step,
          reason: drop.reason,
        } satisfies LearnerFact,
      });
    }),
  },
  guards: {
    'isCurrentVersion?': ({ context, event }) => event.group.policyVersion === context.version,
    'isSynchronous?': ({ context }) => etaOf(context) === 0,
    'trainable?': ({ context, event }) =>
      groupVerdict(event.group, nextToTrain(context), etaOf(context)).reason === null,
    'batchFull?': ({ context }) => {
      if (etaOf(context) === 0) return context.groups.length >= context.input.batchQuestions;
      const ofStep = (g: { step: number }) => g.step === context.step;
      const seen = context.groups.filter(ofStep).length + context.dropped.filter(ofStep).length;
      return seen >= context.input.batchQuestions;
    },
  },
}).createMachine({
  id: 'learner',
  context: ({ input }) => ({
    input,
    version: input.initialVersion,
    step: input.initialStep ?? input.initialVersion,
    dropped: [],
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
          { guard: and(['isSynchronous?', 'isCurrentVersion?']), actions: 'keepGroup' },
          { guard: and([not('isSynchronous?'), 'trainable?']), actions: 'keepGroup' },
          { guard: not('isSynchronous?'), actions: 'dropGroup' },
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
      // Asynchronous runs: later steps' groups arrive while this one trains.
      on: {
        'group.completed': [
          { guard: and([not('isSynchronous?'), 'trainable?']), actions: 'keepGroup' },
          { guard: not('isSynchronous?'), actions: 'dropGroup' },
        ],
      },
      entry: enqueueActions(({ enqueue, context }) => {
        const B = context.input.batchQuestions;
        let groups: QuestionGroup[];
        let rest: QuestionGroup[];
        if (etaOf(context) === 0) {
          groups = context.groups.slice(0, B);
          rest = context.groups.slice(B);
        } else {
          groups = context.groups.filter((g) => g.step === context.step).slice(0, B);
          rest = context.groups.filter((g) => !groups.includes(g));
          if (groups.length === 0)
            throw new StaleStepError(
              context.step,
              context.dropped.filter((d) => d.step === context.step),
            );
        }
        const prepared = prepareStep(context.input, groups, context.lastCategory);
        enqueue.assign({ prepared, groups: rest, lastCategory: prepared.lastCategory });
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
          policyVersion: context.version,
          batch: context.prepared!.batch,
          losses: context.input.losses,
        }),
        onDone: {
          target: 'collecting',
          actions: enqueueActions(({ enqueue, context, event, self }) => {
            const p = context.prepared!;
            const { version, metrics, checkpoint } = event.output;
            if (version !== context.version + 1) throw new PolicyVersionError(context.version + 1, version);
            const dropped = context.dropped.filter((d) => d.step === p.step);
            enqueue.assign({
              version,
              step: p.step + 1,
              dropped: context.dropped.filter((d) => d.step > p.step),
              prepared: null,
              stepsDone: context.stepsDone + 1,
            });
            const b = p.batch;
            const asynchronous = etaOf(context) > 0;
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
                ...(asynchronous ? { trainVersion: context.version, dropped } : {}),
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
