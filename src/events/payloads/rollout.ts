/**
 * The payloads of one rollout: rollout.started, rollout.turn, tool.called, rollout.completed,
 * and the span rules rollout.completed is checked with (conventions: ./fields.ts).
 */

import {
  array,
  bool,
  float32Array,
  int32Array,
  type Json,
  json,
  mask,
  nullable,
  number,
  object,
  oneOf,
  optional,
  pair,
  record,
  type Schema,
  string,
  uint32,
} from '../schema.js';
import { count, text } from './fields.js';
import {
  ROLLOUT_PATHS,
  type RolloutPath,
  STOP_REASONS,
  type StopReason,
  TURN_ACTIONS,
  type TurnActionKind,
} from './vocabulary.js';

export interface RolloutStartedData {
  path: RolloutPath;
  /** Index within its path's group (0..G-1). */
  index: number;
  /** Sampling seed, derived from (run seed, step, question, path, index). */
  seed: number;
}
export const rolloutStarted: Schema<RolloutStartedData> = object<RolloutStartedData>({
  path: oneOf(ROLLOUT_PATHS),
  index: count(),
  seed: uint32(),
});

export interface RolloutTurnData {
  turn: number;
  /** Token ids the policy generated in this turn. */
  tokenIds: Int32Array;
  action: TurnActionKind;
}
export const rolloutTurn: Schema<RolloutTurnData> = object<RolloutTurnData>({
  turn: count(),
  tokenIds: int32Array(),
  action: oneOf(TURN_ACTIONS),
});

export interface ToolCalledData {
  /** The tool's registered name (src/tools/registry.ts), e.g. 'search'. */
  tool: string;
  turn: number;
  /** The argument text the policy wrote between the tool's tags. */
  query: string;
  /** What the tool records of its reply (the search tool: `passageIds` best first, `scores`). */
  record: { [key: string]: Json };
  /** Token ids of the observation inserted into the trajectory (masked out of every loss). */
  observationTokenIds: Int32Array;
  latencyMs: number;
  /** Why the call failed (the observation then says so), null when it succeeded. */
  error: string | null;
}
export const toolCalled: Schema<ToolCalledData> = object<ToolCalledData>({
  tool: text(),
  turn: count(),
  query: string(),
  record: record(json()),
  observationTokenIds: int32Array(),
  latencyMs: number({ min: 0 }),
  error: nullable(string()),
});

export interface RolloutCompletedData {
  path: RolloutPath;
  index: number;
  /** [P] the prompt as the policy saw it. */
  promptTokenIds: Int32Array;
  /** [T] every token after the prompt: generated tokens and inserted observation tokens. */
  responseTokenIds: Int32Array;
  /** [T] log π_old(token) under the rollout policy; 0 on observation tokens. */
  oldLogprobs: Float32Array;
  /** [T] 1 on generated tokens, 0 on observation tokens (masked out of every loss). */
  lossMask: Uint8Array;
  /**
   * [C][2] (v3) each search decision's tokens [start, end) in the response: the call's query
   * (the whole call when the query is empty). Upcast v2 events carry the rule they were scored
   * with: the whole generated run before each observation.
   */
  toolCallSpans: Array<[number, number]>;
  /** The extracted answer, null when none could be extracted. */
  answer: string | null;
  formatOk: boolean;
  reward: number;
  toolCalls: number;
  seed: number;
  /** Why the rollout ended (v1 recorded a coarser `finishReason`; the upcaster maps it). */
  stopReason: StopReason;
  /** The response text by segment (the policy's turns and the inserted observations), for audit and replay. */
  segments?: ResponseSegment[];
}
export interface ResponseSegment {
  kind: 'generated' | 'observation';
  text: string;
}
export const rolloutCompleted: Schema<RolloutCompletedData> = object<RolloutCompletedData>(
  {
    path: oneOf(ROLLOUT_PATHS),
    index: count(),
    promptTokenIds: int32Array(),
    responseTokenIds: int32Array(),
    oldLogprobs: float32Array(),
    lossMask: mask(),
    toolCallSpans: array(pair(count())),
    answer: nullable(string()),
    formatOk: bool(),
    reward: number(),
    toolCalls: count(),
    seed: uint32(),
    stopReason: oneOf(STOP_REASONS),
    segments: optional(
      array(object<ResponseSegment>({ kind: oneOf(['generated', 'observation'] as const), text: string() })),
    ),
  },
  (d) => {
    const t = d.responseTokenIds.length;
    if (d.oldLogprobs.length !== t)
      return ['oldLogprobs', `must have one value per response token (${t}, got ${d.oldLogprobs.length})`];
    if (d.lossMask.length !== t)
      return ['lossMask', `must have one value per response token (${t}, got ${d.lossMask.length})`];
    if (d.path === 'no-tool' && d.toolCalls !== 0)
      return ['toolCalls', `must be 0 on the no-tool path (got ${d.toolCalls})`];
    return toolCallSpansProblem(d);
  },
);

/**
 * The span rules of rollout.completed, as the rollout machine records spans: each inside the
 * response and inside one generated run (a turn; observations are never a call's tokens), in
 * order without overlap, at most one per turn, and exactly one in each turn that an observation
 * follows (that turn ended in an executed call). The no-tool path makes no call. A worker that
 * drops a doubtful call's span, or points it at confident tokens of another turn, is refused.
 */
function toolCallSpansProblem(
  d: Pick<RolloutCompletedData, 'path' | 'lossMask' | 'toolCallSpans'>,
): [string, string] | null {
  const spans = d.toolCallSpans;
  const m = d.lossMask;
  if (d.path === 'no-tool' && spans.length > 0)
    return ['toolCallSpans', `must be empty on the no-tool path (got ${spans.length})`];
  let prevEnd = 0;
  for (let i = 0; i < spans.length; i++) {
    const [start, end] = spans[i];
    const at = `toolCallSpans[${i}]`;
    if (!(start < end && end <= m.length))
      return [
        at,
        `must be a non-empty range inside the ${m.length} response tokens (got [${start}, ${end}])`,
      ];
    if (start < prevEnd)
      return [at, `must start at or after the previous span's end ${prevEnd} (got ${start})`];
    for (let j = start; j < end; j++)
      if (m[j] !== 1) return [at, `must cover generated tokens only (token ${j} is an observation token)`];
    prevEnd = end;
  }
  // Walk the generated runs: count the spans in each, and whether an observation follows it.
  let k = 0;
  for (let a = 0; a < m.length; ) {
    if (m[a] !== 1) {
      a++;
      continue;
    }
    let b = a;
    while (b < m.length && m[b] === 1) b++;
    let inRun = 0;
    while (k < spans.length && spans[k][0] < b) {
      inRun++;
      k++;
    }
    if (inRun > 1)
      return ['toolCallSpans', `must hold at most one span per turn (${inRun} in tokens [${a}, ${b}))`];
    if (inRun === 0 && b < m.length)
      return ['toolCallSpans', `must hold the call of the turn [${a}, ${b}) that an observation follows`];
    a = b;
  }
  return null;
}
