/**
 * The payload (`data`) of every event type, as a TypeScript interface next to its runtime schema.
 * Ids (runId, questionId, rolloutId), step and policy version live in the envelope (`meta`), not
 * here. Token ids, logprobs and masks are typed arrays: they are stored as such in msgpack
 * (`moreTypes`) and exported as plain number arrays in JSONL.
 *
 * Changing a payload shape means a new `v` for that type in CURRENT_VERSION plus an upcaster from
 * the old version (src/events/upcast.ts): stored events are decoded forever.
 */
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
  record,
  type Schema,
  string,
  uint32,
} from './schema.js';

export const ROLLOUT_PATHS = ['with-tool', 'no-tool'] as const;
export type RolloutPath = (typeof ROLLOUT_PATHS)[number];

export const TURN_ACTIONS = ['think', 'search', 'answer', 'invalid'] as const;
export type TurnAction = (typeof TURN_ACTIONS)[number];

export const BOUNDARY_CATEGORIES = ['tool-dependent', 'efficiency', 'hallucination', 'both-wrong'] as const;
export type BoundaryCategory = (typeof BOUNDARY_CATEGORIES)[number];

export const FINISH_REASONS = ['answer', 'max-turns', 'max-tokens', 'format-error'] as const;
export type FinishReason = (typeof FINISH_REASONS)[number];

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
}
export const questionAssigned: Schema<QuestionAssignedData> = object<QuestionAssignedData>({
  text: text(),
  goldAnswers: array(text(), { min: 1 }),
  split: text(),
  groupSize: object({ withTool: count(), noTool: count() }),
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
  action: TurnAction;
}
export const rolloutTurn: Schema<RolloutTurnData> = object<RolloutTurnData>({
  turn: count(),
  tokenIds: int32Array(),
  action: oneOf(TURN_ACTIONS),
});

export interface ToolCalledData {
  turn: number;
  query: string;
  /** Retrieved passage ids, best first, with their scores (same length). */
  passageIds: string[];
  scores: number[];
  /** Token ids of the observation inserted into the trajectory (masked out of every loss). */
  observationTokenIds: Int32Array;
  latencyMs: number;
  /** Why the call failed (the observation then says so), null when it succeeded. */
  error: string | null;
}
export const toolCalled: Schema<ToolCalledData> = object<ToolCalledData>(
  {
    turn: count(),
    query: string(),
    passageIds: array(text()),
    scores: array(number()),
    observationTokenIds: int32Array(),
    latencyMs: number({ min: 0 }),
    error: nullable(string()),
  },
  (d) =>
    d.scores.length === d.passageIds.length
      ? null
      : ['scores', `must have one score per passage id (${d.passageIds.length}, got ${d.scores.length})`],
);

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
  /** The extracted answer, null when none could be extracted. */
  answer: string | null;
  formatOk: boolean;
  reward: number;
  toolCalls: number;
  seed: number;
  finishReason: FinishReason;
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
    answer: nullable(string()),
    formatOk: bool(),
    reward: number(),
    toolCalls: count(),
    seed: uint32(),
    finishReason: oneOf(FINISH_REASONS),
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
    return null;
  },
);

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
export function categoryOf(wt: boolean, nt: boolean): BoundaryCategory {
  if (wt) return nt ? 'efficiency' : 'tool-dependent';
  return nt ? 'hallucination' : 'both-wrong';
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

export type CategoryCounts = Record<BoundaryCategory, number>;

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
export interface LearnerStepData {
  policyVersionBefore: number;
  policyVersionAfter: number;
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
  /** Index of the mini-batch holding the row. */
  miniBatch: number;
}
export interface TrainedBatch {
  T: number;
  lossTokens: number;
  /** Seed of the question shuffle before the mini-batch split. */
  miniBatchSeed: number;
  rows: TrainedRow[];
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
      miniBatch: count(),
    }),
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
  },
  (d) =>
    d.policyVersionAfter >= d.policyVersionBefore
      ? null
      : ['policyVersionAfter', `must be >= policyVersionBefore (${d.policyVersionBefore})`],
);

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
