/**
 * The payload (`data`) of every event type, as a TypeScript interface next to its runtime schema.
 * Ids (runId, questionId, rolloutId), step and policy version live in the envelope (`meta`), not
 * here. Token ids, logprobs and masks are typed arrays: they are stored as such in msgpack
 * (`moreTypes`) and exported as plain number arrays in JSONL.
 *
 * Changing a payload shape means a new `v` for that type in CURRENT_VERSION plus an upcaster from
 * the old version (src/events/upcast.ts): stored events are decoded forever.
 */

import type { OfflineTarget } from '../rl/offline.js';
// The algorithm's concepts are defined once, in src/rl/types.ts; the catalog re-exports them so
// readers of events need one import.
import {
  BOUNDARY_CATEGORIES,
  type BoundaryCategory,
  type CategoryCounts,
  categoryOf,
  ROLLOUT_PATHS,
  type RolloutPath,
  STOP_REASONS,
  type StopReason,
  TURN_ACTIONS,
  type TurnActionKind,
} from '../rl/types.js';
import { offlineTarget } from './offline-payload.js';
import {
  array,
  bool,
  float32Array,
  int,
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
} from './schema.js';

export type {
  BoundaryCategory,
  CategoryCounts,
  RolloutPath,
  StopReason,
  TurnActionKind,
} from '../rl/types.js';
export { BOUNDARY_CATEGORIES, categoryOf, ROLLOUT_PATHS, STOP_REASONS, TURN_ACTIONS } from '../rl/types.js';

export const RUN_STATUSES = ['completed', 'failed', 'aborted'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

const text = () => string({ nonEmpty: true });
const count = () => int({ min: 0 });

export interface RunStartedData {
  /** Registered algorithm name, e.g. 'grpo', 'grpo+akbe', 'otc-po'. */
  algo: string;
  /** The full resolved run config (every default filled in), so the run can be repeated. */
  config: { [key: string]: Json };
  /** Named seeds; `run` is the root every other draw derives from. */
  seeds: Record<string, number>;
  /** The synthetic world (or dataset) the questions come from, e.g. 'world:seed=7:v1'. */
  worldRef: string;
  /** The initial policy checkpoint (object name or path). */
  policyRef: string;
  /** akbe package version that wrote the run. */
  akbeVersion: string;
  /** Size of the training question pool the run machine samples each step's B questions from (replay re-draws them). */
  questionPoolSize?: number;
}
export const runStarted: Schema<RunStartedData> = object<RunStartedData>(
  {
    algo: text(),
    config: record(json()),
    seeds: record(uint32()),
    worldRef: text(),
    policyRef: text(),
    akbeVersion: text(),
    questionPoolSize: optional(count()),
  },
  (d) => ('run' in d.seeds ? null : ['seeds.run', 'is required (the root seed)']),
);

export interface StepStartedData {
  step: number;
  /** The policy version that rolls out every question of this step. */
  policyVersion: number;
  questionIds: string[];
}
export const stepStarted: Schema<StepStartedData> = object<StepStartedData>({
  step: count(),
  policyVersion: count(),
  questionIds: array(text()),
});

export interface QuestionAssignedData {
  text: string;
  goldAnswers: string[];
  /** Dataset split or world question family, e.g. 'train', 'single-hop', 'multi-hop'. */
  split: string;
  /** Trajectories per path (G_wt, G_nt). */
  groupSize: { withTool: number; noTool: number };
  /**
   * v2: the world's oracle, whether every fact the question needs was in the base policy's
   * pretraining mix. Absent when the questions come without one (and on every v1 event).
   */
  known?: boolean;
  /**
   * offline-akbe only (an optional field: older logs replay unchanged): the question's label and
   * target, built once from the frozen checkpoint's rollouts (src/rl/offline.ts); the same record
   * on every step that draws the question.
   */
  offline?: OfflineTarget;
}
export const questionAssigned: Schema<QuestionAssignedData> = object<QuestionAssignedData>({
  text: text(),
  goldAnswers: array(text(), { min: 1 }),
  split: text(),
  groupSize: object({ withTool: count(), noTool: count() }),
  known: optional(bool()),
  offline: optional(offlineTarget),
});

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

export interface GroupPath {
  rolloutIds: string[];
  rewards: number[];
}
export interface GroupCompletedData {
  withTool: GroupPath;
  noTool: GroupPath;
}
const groupPath = object<GroupPath>({ rolloutIds: array(text()), rewards: array(number()) }, (g) =>
  g.rewards.length === g.rolloutIds.length ? null : ['rewards', 'must have one reward per rollout id'],
);
export const groupCompleted: Schema<GroupCompletedData> = object<GroupCompletedData>({
  withTool: groupPath,
  noTool: groupPath,
});

export interface BoundaryLabeledData {
  /** Any with-tool trajectory correct. */
  wt: boolean;
  /** Any no-tool trajectory correct. */
  nt: boolean;
  category: BoundaryCategory;
  /** The selected AKBE target y*, null when there is none (both-wrong). */
  targetRolloutId: string | null;
  /** How the target was chosen, e.g. 'min-tool-calls', 'shortest', 'random-correct-no-tool', 'none'. */
  selectionRule: string;
  /** Seed of the uniform tie-break among equally good candidates. */
  tieBreakSeed: number;
  /** The category at this question's previous labeling, null the first time. */
  previousCategory: BoundaryCategory | null;
}
export const boundaryLabeled: Schema<BoundaryLabeledData> = object<BoundaryLabeledData>(
  {
    wt: bool(),
    nt: bool(),
    category: oneOf(BOUNDARY_CATEGORIES),
    targetRolloutId: nullable(text()),
    selectionRule: text(),
    tieBreakSeed: uint32(),
    previousCategory: nullable(oneOf(BOUNDARY_CATEGORIES)),
  },
  (d) => {
    const expected = categoryOf(d.wt, d.nt);
    if (d.category !== expected)
      return ['category', `must be '${expected}' when wt=${d.wt} and nt=${d.nt} (got '${d.category}')`];
    if (d.category === 'both-wrong' && d.targetRolloutId !== null)
      return ['targetRolloutId', 'must be null for both-wrong'];
    return null;
  },
);

export interface LearnerMetrics {
  loss: number;
  lossGrpo: number;
  lossAkbe: number;
  gradNorm: number;
  /** Fraction of generated tokens whose ratio was clipped. */
  clipFrac: number;
  kl: number;
  entropy: number;
  /** Exact match over this step's with-tool rollouts. */
  em: number;
  /** Mean tool calls per question. */
  tc: number;
  /** Σ correct / Σ tool calls; null when no tool was called. */
  tp: number | null;
  categoryCounts: CategoryCounts;
  /** Questions whose category changed since their previous labeling. */
  boundaryShifts: number;
  meanResponseLength: number;
  toolCallsPerBatch: number;
  tokensPerSecond: number;
  rolloutSeconds: number;
  trainSeconds: number;
  /** Optimizer updates in this step (mini-batches × epochs). */
  updates: number;
}
/** A group an asynchronous run's learner did not train (src/machines/learner.ts). */
export interface DroppedGroupData {
  questionId: string;
  step: number;
  /** The version that rolled it out. */
  policyVersion: number;
  /** The version its step trains from. */
  trainVersion: number;
  /** 'too-stale': trainVersion - policyVersion > maxStaleness. */
  reason: 'too-stale' | 'step-trained';
}
export interface LearnerStepData {
  /** The version the update started from (pi_prox; = the rollouts' version when synchronous). */
  policyVersionBefore: number;
  policyVersionAfter: number;
  /**
   * Asynchronous runs (maxStaleness >= 1) only: the version that rolled out the step's rows (the
   * envelope's policyVersion too); policyVersionBefore - rolloutVersion is their staleness.
   */
  rolloutVersion?: number;
  /** Asynchronous runs only: the step's groups the learner dropped, with the reason. */
  dropped?: DroppedGroupData[];
  metrics: LearnerMetrics;
  /** Further named scalars (e.g. 'actor/pg_clipfrac_lower'), for experiments. */
  extra: Record<string, number>;
  /** The batch the trainer was given (src/rl assembleBatch), row by row, for audit. */
  batch?: TrainedBatch;
}
export interface TrainedRow {
  rolloutId: string;
  /** The prompt the row's response is conditioned on. */
  context: RolloutPath;
  /** GRPO advantage of the row, as trained (0 on AKBE-only rows). */
  advantage: number;
  /** In L_GRPO / in L_AKBE (the question's target). */
  grpo: boolean;
  akbe: boolean;
  /** The row's weight in L_AKBE (src/rl/batch.ts akbeRowWeights); absent in logs before session 3. */
  akbeWeight?: number;
  /** Index of the mini-batch holding the row. */
  miniBatch: number;
}
export interface TrainedBatch {
  T: number;
  lossTokens: number;
  /** Seed of the question shuffle before the mini-batch split. */
  miniBatchSeed: number;
  rows: TrainedRow[];
  /** dpo-akbe: the preference pairs (row indices), their L_DPO weights and reference logprobs. */
  dpoPairs?: TrainedDpoPair[];
}
export interface TrainedDpoPair {
  chosen: number;
  rejected: number;
  /** The pair's weight in its mini-batch's L_DPO (1 / pairs there). */
  weight: number;
  /** Sequence logprobs of the chosen and rejected rows under the frozen reference v0. */
  refChosen?: number;
  refRejected?: number;
}
const trainedBatch = object<TrainedBatch>({
  T: count(),
  lossTokens: count(),
  miniBatchSeed: uint32(),
  rows: array(
    object<TrainedRow>({
      rolloutId: text(),
      context: oneOf(ROLLOUT_PATHS),
      advantage: number(),
      grpo: bool(),
      akbe: bool(),
      akbeWeight: optional(number({ min: 0 })),
      miniBatch: count(),
    }),
  ),
  dpoPairs: optional(
    array(
      object<TrainedDpoPair>({
        chosen: count(),
        rejected: count(),
        weight: number({ min: 0, max: 1 }),
        refChosen: optional(number({ max: 0 })),
        refRejected: optional(number({ max: 0 })),
      }),
    ),
  ),
});
export const learnerStep: Schema<LearnerStepData> = object<LearnerStepData>(
  {
    policyVersionBefore: count(),
    policyVersionAfter: count(),
    metrics: object<LearnerMetrics>({
      loss: number(),
      lossGrpo: number(),
      lossAkbe: number(),
      gradNorm: number({ min: 0 }),
      clipFrac: number({ min: 0, max: 1 }),
      kl: number(),
      entropy: number(),
      em: number({ min: 0, max: 1 }),
      tc: number({ min: 0 }),
      tp: nullable(number({ min: 0 })),
      categoryCounts: object<CategoryCounts>({
        'tool-dependent': count(),
        efficiency: count(),
        hallucination: count(),
        'both-wrong': count(),
      }),
      boundaryShifts: count(),
      meanResponseLength: number({ min: 0 }),
      toolCallsPerBatch: count(),
      tokensPerSecond: number({ min: 0 }),
      rolloutSeconds: number({ min: 0 }),
      trainSeconds: number({ min: 0 }),
      updates: count(),
    }),
    extra: record(number()),
    batch: optional(trainedBatch),
    rolloutVersion: optional(count()),
    dropped: optional(
      array(
        object<DroppedGroupData>({
          questionId: text(),
          step: count(),
          policyVersion: count(),
          trainVersion: count(),
          reason: oneOf(['too-stale', 'step-trained'] as const),
        }),
      ),
    ),
  },
  (d) => {
    if (d.policyVersionAfter < d.policyVersionBefore)
      return ['policyVersionAfter', `must be >= policyVersionBefore (${d.policyVersionBefore})`];
    if (d.rolloutVersion !== undefined && d.rolloutVersion > d.policyVersionBefore)
      return ['rolloutVersion', `must be <= policyVersionBefore (${d.policyVersionBefore})`];
    return null;
  },
);

/** When a run's policy was evaluated: before its first step (or resumed step), or after its last. */
export const EVAL_WHEN = ['before', 'after'] as const;
export interface EvalCompletedData {
  when: (typeof EVAL_WHEN)[number];
  /** The policy version evaluated. */
  version: number;
  split: 'train' | 'dev' | 'test';
  questions: number;
  /** With-tool path: EM, tool calls per question (src/rl/metrics countedToolCalls), EM / tool calls. */
  em: number;
  tc: number;
  tp: number | null;
  noToolEm: number;
  /** The world's oracle: with-tool search rate on known questions, no-search rate on unknown (null: none). */
  knownSearchRate: number | null;
  unknownNoSearchRate: number | null;
}
const rate01 = () => nullable(number({ min: 0, max: 1 }));
export const evalCompleted: Schema<EvalCompletedData> = object<EvalCompletedData>({
  when: oneOf(EVAL_WHEN),
  version: count(),
  split: oneOf(['train', 'dev', 'test'] as const),
  questions: count(),
  em: number({ min: 0, max: 1 }),
  tc: number({ min: 0 }),
  tp: nullable(number({ min: 0 })),
  noToolEm: number({ min: 0, max: 1 }),
  knownSearchRate: rate01(),
  unknownNoSearchRate: rate01(),
});

export interface PolicyPublishedData {
  version: number;
  /** Object store bucket and object name of the checkpoint. */
  bucket: string;
  checkpoint: string;
  /** sha256 of the checkpoint bytes, lowercase hex. */
  sha256: string;
  bytes: number;
}
export const policyPublished: Schema<PolicyPublishedData> = object<PolicyPublishedData>({
  version: count(),
  bucket: text(),
  checkpoint: text(),
  sha256: string({ pattern: /^[0-9a-f]{64}$/, hint: '64 lowercase hex digits' }),
  bytes: count(),
});

export interface RunFinishedData {
  status: RunStatus;
  reason?: string;
  stepsCompleted: number;
  elapsedSeconds: number;
}
export const runFinished: Schema<RunFinishedData> = object<RunFinishedData>({
  status: oneOf(RUN_STATUSES),
  reason: optional(string()),
  stepsCompleted: count(),
  elapsedSeconds: number({ min: 0 }),
});
