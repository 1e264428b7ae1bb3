/**
 * The one mapping from a stored `rollout.completed` event back to the algorithm's RolloutResult:
 * the learner's completion watcher reads it as recorded, the audit with its re-derived outcome.
 * Rules, as the rollout machine's `finish` applies them:
 * - `em` is 1 only for a well-formed rollout whose reward is 1 (the reward is Search-R1's binary
 *   EM; a partial or shaped reward is not an exact match);
 * - `formatReason` is 'ok', else the grammar's reason when the rollout stopped on its answer, else
 *   the stop reason;
 * - segments are the recorded ones; turns are the turn events when the caller has them, else the
 *   generated segments (one per generate call).
 */

import type { EventOf } from '../events/catalog.js';
import type { RolloutResult, TextSegment } from '../rl/types.js';

/** A rollout's outcome: as recorded, or re-derived from its text by the audit. */
export interface RolloutOutcome {
  answer: string | null;
  formatOk: boolean;
  reward: number;
  /** The grammar's failure code when known (the outcome was derived from the text). */
  formatReason?: string;
}

export interface RolloutResultOptions {
  /** Replaces the recorded answer, format flag and reward (the audit's recomputation). */
  outcome?: RolloutOutcome;
  /** Generate calls, when the caller has the rollout's turn events. */
  turns?: number;
}

export function rolloutResultOf(
  e: EventOf<'rollout.completed'>,
  opts: RolloutResultOptions = {},
): RolloutResult {
  const d = e.data;
  const outcome = opts.outcome ?? { answer: d.answer, formatOk: d.formatOk, reward: d.reward };
  const segments: TextSegment[] = (d.segments ?? []).map((x) => ({ kind: x.kind, text: x.text }));
  const stop = d.stopReason;
  const failure = outcome.formatReason ?? (stop === 'answer' ? 'format' : stop);
  return {
    questionId: e.meta.questionId,
    rolloutId: e.meta.rolloutId,
    index: d.index,
    path: d.path,
    policyVersion: e.meta.policyVersion,
    seed: d.seed,
    promptTokens: Array.from(d.promptTokenIds),
    responseTokens: Array.from(d.responseTokenIds),
    responseLogprobs: Array.from(d.oldLogprobs),
    responseMask: Array.from(d.lossMask),
    toolCallSpans: d.toolCallSpans.map(([start, end]): [number, number] => [start, end]),
    segments,
    answer: outcome.answer,
    toolCalls: d.toolCalls,
    turns: opts.turns || segments.filter((x) => x.kind === 'generated').length,
    formatOk: outcome.formatOk,
    formatReason: outcome.formatOk ? 'ok' : failure,
    stopReason: stop,
    em: outcome.formatOk && outcome.reward === 1 ? 1 : 0,
    reward: outcome.reward,
  };
}
