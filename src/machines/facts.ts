/**
 * Facts the machines report for the event log, and how they travel.
 *
 * Every machine reports a fact with its `report` action: it `emit`s it (xstate 5 emitted events,
 * for `actor.on(type, fn)` listeners) and, when the machine runs as a child, relays it to its
 * parent as a `{ type: 'fact', fact }` event; parents re-report what they receive. So the root
 * actor's listeners see every fact of the whole tree (run -> questions -> rollouts, learner), and a
 * rollout machine running alone in a rollout worker still emits its own. The wiring turns each fact
 * into an event of the catalog (src/events), adding runId, timestamps and dedup ids.
 *
 * Names follow the catalog: question.assigned, rollout.started, rollout.turn, tool.called, rollout.completed,
 * group.completed, boundary.labeled, learner.step, policy.published, step.started, run.finished.
 * A rollout's StopReason maps to the catalog's finishReason as answer -> 'answer',
 * length -> 'max-tokens', tool-limit -> 'max-turns', eos | invalid-action -> 'format-error'.
 */
import { type AnyActorRef, type EventObject, enqueueActions } from 'xstate';
import type { StepMetrics } from '../rl/metrics.js';
import type {
  BoundaryCategory,
  BoundaryLabel,
  QuestionGroup,
  RolloutPath,
  RolloutResult,
  StopReason,
} from '../rl/types.js';

export type RolloutFact =
  | {
      type: 'rollout.started';
      questionId: string;
      rolloutId: string;
      path: RolloutPath;
      index: number;
      seed: number;
      policyVersion: number;
    }
  | {
      type: 'rollout.turn';
      questionId: string;
      rolloutId: string;
      policyVersion: number;
      turn: number;
      seed: number;
      tokenIds: number[];
      /** 'think' = the turn ended without an action (EOS or the length limit). */
      action: 'think' | 'search' | 'answer' | 'invalid';
    }
  | {
      type: 'tool.called';
      questionId: string;
      rolloutId: string;
      policyVersion: number;
      turn: number;
      call: number;
      query: string;
      observationTokenIds: number[];
      passageIds: string[];
      scores: number[];
      latencyMs: number;
      error: string | null;
    }
  | { type: 'rollout.completed'; result: RolloutResult };

export type QuestionFact =
  | {
      type: 'question.assigned';
      questionId: string;
      step: number;
      policyVersion: number;
      text: string;
      gold: string[];
      split: string;
      groupSize: { withTool: number; noTool: number };
    }
  | { type: 'group.completed'; group: QuestionGroup };

export type LearnerFact =
  | {
      type: 'boundary.labeled';
      step: number;
      policyVersion: number;
      label: BoundaryLabel;
      /** How the target was chosen: 'min-tool-calls' | 'shortest' | 'random-correct-no-tool' | 'none'. */
      selectionRule: string;
      previousCategory: BoundaryCategory | null;
    }
  | {
      type: 'learner.step';
      step: number;
      /** The version that produced the step's rollouts. */
      policyVersion: number;
      stepMetrics: StepMetrics;
      /** What the trainer reported (losses, clip fractions, tokens/s, ...). */
      trainMetrics: Record<string, number>;
      /** Rows, tokens and mini-batches of the trained batch. */
      batch: { rows: number; T: number; lossTokens: number; miniBatches: number };
      /** Seed of the question shuffle before the mini-batch split. */
      miniBatchSeed: number;
    }
  | { type: 'policy.published'; step: number; version: number; checkpoint?: string }
  /** A group whose version is not the learner's current one (never expected on-policy). */
  | { type: 'group.discarded'; questionId: string; policyVersion: number; expectedVersion: number };

export type RunFact =
  /** `seed`: the question-sampling seed, deriveSeed(runSeed, 'questions', step). */
  | { type: 'step.started'; step: number; policyVersion: number; questionIds: string[]; seed: number }
  | { type: 'run.finished'; steps: number; policyVersion: number };

export type AkbeFact = RolloutFact | QuestionFact | LearnerFact | RunFact;

/** The event a child sends its parent to relay a fact. */
export type FactEvent = { type: 'fact'; fact: AkbeFact };

export function finishReasonOf(stop: StopReason): 'answer' | 'max-tokens' | 'max-turns' | 'format-error' {
  if (stop === 'answer') return 'answer';
  if (stop === 'length') return 'max-tokens';
  if (stop === 'tool-limit') return 'max-turns';
  return 'format-error';
}

/**
 * The `report` action: emit the fact to this actor's listeners and relay it to the parent, if any.
 * (`_parent` is part of xstate's ActorRef type; a root actor has none.)
 */
export function reportFact<TFact extends AkbeFact>() {
  // One action shared by machines with different contexts, events and actors: xstate's generics
  // are invariant in them, so the shared helper erases them (it reads none of them).
  // biome-ignore lint/suspicious/noExplicitAny: see above
  return enqueueActions<any, EventObject, TFact, any, any, any, any, never, any>(
    ({ enqueue, self }, fact) => {
      enqueue.emit(fact);
      const parent = (self as AnyActorRef)._parent;
      if (parent) enqueue.sendTo(parent, { type: 'fact', fact } satisfies FactEvent);
    },
  );
}
