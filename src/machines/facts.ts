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
 */
import { type AnyActorRef, type EventObject, enqueueActions } from 'xstate';
import type { StepMetrics } from '../rl/metrics.js';
import type {
  BoundaryCategory,
  BoundaryLabel,
  QuestionGroup,
  RolloutPath,
  RolloutResult,
  TurnActionKind,
} from '../rl/types.js';
import type { Json } from '../util/json.js';

/** What a rollout machine reports: its start, each turn, each tool call, and its end. */
export type RolloutFact =
  | {
      type: 'rollout.started';
      step: number;
      questionId: string;
      rolloutId: string;
      path: RolloutPath;
      index: number;
      seed: number;
      policyVersion: number;
    }
  | {
      type: 'rollout.turn';
      step: number;
      questionId: string;
      rolloutId: string;
      policyVersion: number;
      turn: number;
      seed: number;
      tokenIds: number[];
      /** 'think' = the turn ended without an action (EOS or the length limit). */
      action: TurnActionKind;
    }
  | {
      type: 'tool.called';
      step: number;
      /** The tool's name (src/tools). */
      tool: string;
      questionId: string;
      rolloutId: string;
      policyVersion: number;
      turn: number;
      call: number;
      query: string;
      observationTokenIds: number[];
      /** What the tool records of its reply (search: passageIds, scores). */
      record: { [key: string]: Json };
      latencyMs: number;
      error: string | null;
    }
  | { type: 'rollout.completed'; step: number; result: RolloutResult };

/** What a question machine reports: its rollouts' lifecycle, completion and boundary label. */
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
      /** The world's oracle (absent when the questions carry none). */
      known?: boolean;
    }
  | { type: 'group.completed'; group: QuestionGroup };

/** Why the learner did not train a group (maxStaleness >= 1). */
export type DropReason = 'too-stale' | 'step-trained';

/** A group the learner dropped, as `learner.step` records it. */
export interface DroppedGroup {
  questionId: string;
  step: number;
  policyVersion: number;
  /** The version the group's step trains (or trained) from. */
  trainVersion: number;
  reason: DropReason;
}

/** What the learner machine reports: labels, targets, dropped groups, the step it trained. */
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
      /** maxStaleness >= 1: the version the update started from (pi_prox; policyVersion + staleness). */
      trainVersion?: number;
      /** maxStaleness >= 1: the step's groups the learner dropped, with why. */
      dropped?: DroppedGroup[];
    }
  | { type: 'policy.published'; step: number; version: number; checkpoint?: string }
  /**
   * A group the learner will not train: synchronous, one whose version is not the current one
   * (never expected); maxStaleness >= 1, one too stale for its step or of a step already trained
   * (`step`, `reason`; expectedVersion: the version its step trains from).
   */
  | {
      type: 'group.discarded';
      questionId: string;
      policyVersion: number;
      expectedVersion: number;
      step?: number;
      reason?: DropReason;
    };

/** What the run machine reports: steps opening and the run's end. */
export type RunFact =
  /** `seed`: the question-sampling seed, deriveSeed(runSeed, 'questions', step). */
  | { type: 'step.started'; step: number; policyVersion: number; questionIds: string[]; seed: number }
  | { type: 'run.finished'; steps: number; policyVersion: number };

/** Every fact a machine reports (actors/log/fact-events.ts maps each to its event). */
export type AkbeFact = RolloutFact | QuestionFact | LearnerFact | RunFact;

/** The event a child sends its parent to relay a fact. */
export type FactEvent = { type: 'fact'; fact: AkbeFact };

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
