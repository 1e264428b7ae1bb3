/**
 * Messages between `PolicyHost` (any thread) and `policy-worker` (the thread that owns the ORT
 * sessions). Every request carries an id; the worker answers each with a reply of the same id.
 * Large arrays (parameters, logprobs) travel as transferred ArrayBuffers, never as copies.
 */
import type { GPTConfig } from './config.js';
import type { GenerateRequest, GenerateResult } from './decoder.js';
import type { TrainRequest } from './policy-runtime.js';
import type { DeviceChoice } from './session.js';
import type { TrainerOptions } from './trainer.js';

export interface PolicyWorkerInit {
  /** Either a checkpoint directory or an in-memory policy. */
  checkpoint?: string;
  config?: GPTConfig;
  params?: Record<string, Float32Array>;
  device?: DeviceChoice;
  intraOpThreads?: number;
  /** Token id -> text piece, to check stop strings. */
  vocabPieces?: string[];
  maxBatch?: number;
  windowMs?: number;
  /** Trainer options (loss aggregation and form, hyperparameters); B and T come from each batch. */
  trainer?: Omit<TrainerOptions, 'batch' | 'seq' | 'session'>;
}

export type PolicyMethod =
  | { method: 'generate'; args: [GenerateRequest] }
  | { method: 'logprobs'; args: [number[][]] }
  | { method: 'trainStep'; args: [TrainRequest] }
  | { method: 'getParams'; args: [] }
  | { method: 'setParams'; args: [Record<string, Float32Array>] }
  | { method: 'loadCheckpoint'; args: [string] }
  | { method: 'saveCheckpoint'; args: [string] }
  | { method: 'info'; args: [] }
  | { method: 'sleep'; args: [number] };

export type PolicyRequest = { id: number } & PolicyMethod;

export type PolicyReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { name: string; message: string; stack?: string } };

/** First message from the worker: ready (with the device that runs) or failed to start. */
export type PolicyReady =
  | { ready: true; device: string; log: string[] }
  | { ready: false; error: { name: string; message: string } };

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

/** ArrayBuffers of typed arrays in `value`, to transfer with a message. */
export function transferablesOf(value: unknown, out: ArrayBuffer[] = []): ArrayBuffer[] {
  if (ArrayBuffer.isView(value)) {
    if (value.buffer instanceof ArrayBuffer && !out.includes(value.buffer)) out.push(value.buffer);
  } else if (Array.isArray(value)) {
    for (const v of value) transferablesOf(v, out);
  } else if (value && typeof value === 'object') {
    for (const v of Object.values(value)) transferablesOf(v, out);
  }
  return out;
}
