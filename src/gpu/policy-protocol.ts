/**
 * Messages between `PolicyHost` (any thread) and `policy-worker` (the thread that owns the ORT
 * sessions), carried by util/worker-rpc.ts: large arrays (parameters, logprobs) travel as
 * transferred ArrayBuffers, never as copies.
 */
import type { PolicyConfig } from './architecture.js';
import type { GenerateRequest, GenerateResult } from './decoder.js';
import type { WeightsDtype } from './model-inputs.js';
import type { TrainRequest } from './policy-runtime.js';
import type { DeviceChoice } from './session.js';
import type { TrainerOptions } from './trainer.js';

export interface PolicyWorkerInit {
  /** Either a checkpoint directory or an in-memory policy. */
  checkpoint?: string;
  config?: PolicyConfig;
  params?: Record<string, Float32Array>;
  device?: DeviceChoice;
  intraOpThreads?: number;
  /** Token id -> text piece, to check stop strings. */
  vocabPieces?: string[];
  maxBatch?: number;
  /** Most tokens one decode iteration feeds the model (prefilled prompts + one per row). */
  maxBatchTokens?: number;
  windowMs?: number;
  /** Trainer options (loss aggregation and form, hyperparameters); B and T come from each batch. */
  trainer?: Omit<TrainerOptions, 'batch' | 'seq' | 'session'>;
  /** How the decode and scoring graphs take the weights (model-inputs.ts; default float32). */
  weights?: WeightsDtype;
  /** Decode each request to the same bits whatever it is batched with (PolicyRuntimeOptions). */
  batchInvariant?: boolean;
}

export type PolicyMethod =
  | { method: 'generate'; args: [GenerateRequest] }
  | { method: 'logprobs'; args: [number[][]] }
  | { method: 'trainStep'; args: [TrainRequest] }
  | { method: 'getParams'; args: [] }
  | { method: 'setParams'; args: [Record<string, Float32Array>] }
  | { method: 'loadCheckpoint'; args: [string] }
  | { method: 'holdVersion'; args: [number, number] }
  | { method: 'loadVersion'; args: [number, string, number] }
  | { method: 'saveCheckpoint'; args: [string] }
  | { method: 'info'; args: [] }
  | { method: 'sleep'; args: [number] };

/** What the worker announces once its sessions are ready. */
export type PolicyReady = { device: string; log: string[] };

export type { GenerateRequest, GenerateResult };

/** An error raised inside the worker, re-thrown in the host with the worker's name and message. */
export class PolicyWorkerError extends Error {
  constructor(
    readonly remoteName: string,
    message: string,
    readonly remoteStack?: string,
  ) {
    super(message);
    this.name = remoteName.endsWith('Error') ? remoteName : 'PolicyWorkerError';
  }
}
