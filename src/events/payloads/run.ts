/**
 * The payloads of the run's lifecycle: run.started, step.started, policy.published,
 * eval.completed, run.finished (conventions: ./fields.ts).
 */
import {
  array,
  bool,
  type Json,
  json,
  nullable,
  number,
  object,
  oneOf,
  optional,
  record,
  type Schema,
  string,
  uint32,
} from '../schema.js';
import { count, sha256Hex, text } from './fields.js';

export const RUN_STATUSES = ['completed', 'failed', 'aborted'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export interface RunStartedData {
  /** Registered algorithm name, e.g. 'grpo', 'akbe', 'otc-po' (logs before session 9: 'grpo+akbe' for akbe). */
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
  /**
   * v2: what the trainer's arithmetic ran on, so a verifier (`akbe replay --verify-training`) can
   * refuse to compare weights made under another runtime. null: a v1 log, or a run whose trainer
   * role ran in another process (`akbe train --no-workers`), which run.started cannot see.
   */
  trainerRuntime?: TrainerRuntimeData | null;
  /**
   * v2: the orchestrator's public nkey (U...) that signs this run's train requests; a trainer in
   * another process (`akbe worker --role trainer`) trains only on requests it signed. null: the
   * orchestrator connected anonymously (no credentials), so requests go unsigned.
   */
  trainSigner?: string | null;
}

/** The settings a training step's bits depend on beyond the request and the weights (issue 22 item 2). */
export interface TrainerRuntimeData {
  /** onnxruntime-node's package version (its native library is the same build). */
  ortVersion: string;
  /** The ORT execution provider asked for: cpu | webgpu | cuda | auto (auto: the first usable). */
  executionProvider: string;
  /** ORT intra-op threads; 0 = ORT's default, one per physical core of `hostCpus`' machine. */
  intraOpThreads: number;
  /** Logical CPUs of the trainer's machine (os.availableParallelism), what ORT's default follows. */
  hostCpus: number;
  /** Where AdamW runs: 'host' (in place, src/gpu/adamw.ts) or 'graph' (inside the train graph). */
  optimizer: 'host' | 'graph';
  /** The trainer's float type. */
  dtype: 'float32' | 'float64';
  /** The decoder's batch invariance (config.train.batchInvariantDecode): rollouts repeat bit for bit. */
  batchInvariantDecode: boolean;
}
const trainerRuntime: Schema<TrainerRuntimeData> = object<TrainerRuntimeData>({
  ortVersion: text(),
  executionProvider: text(),
  intraOpThreads: count(),
  hostCpus: count(),
  optimizer: oneOf(['host', 'graph'] as const),
  dtype: oneOf(['float32', 'float64'] as const),
  batchInvariantDecode: bool(),
});
export const runStarted: Schema<RunStartedData> = object<RunStartedData>(
  {
    algo: text(),
    config: record(json()),
    seeds: record(uint32()),
    worldRef: text(),
    policyRef: text(),
    akbeVersion: text(),
    questionPoolSize: optional(count()),
    trainerRuntime: optional(nullable(trainerRuntime)),
    trainSigner: optional(nullable(text())),
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

export interface PolicyPublishedData {
  version: number;
  /** Object store bucket and object name of the checkpoint. */
  bucket: string;
  checkpoint: string;
  /** sha256 of the checkpoint bytes, lowercase hex. */
  sha256: string;
  bytes: number;
  /**
   * v2: the canonical sha256 of the train request the trainer trained on, computed by the trainer
   * from the request it received (src/events/train-digest.ts); null for v0 and in v1 logs.
   */
  requestSha256?: string | null;
  /** v2: sha256 of every file of the checkpoint (config, weights, optimizer state); null in v1 logs. */
  manifest?: Record<string, string> | null;
  /** v2: manifestDigest(manifest); null in v1 logs. */
  manifestSha256?: string | null;
}
export const policyPublished: Schema<PolicyPublishedData> = object<PolicyPublishedData>({
  version: count(),
  bucket: text(),
  checkpoint: text(),
  sha256: sha256Hex(),
  bytes: count(),
  requestSha256: optional(nullable(sha256Hex())),
  manifest: optional(nullable(record(sha256Hex()))),
  manifestSha256: optional(nullable(sha256Hex())),
});

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
