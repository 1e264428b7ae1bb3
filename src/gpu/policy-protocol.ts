/**
 * Messages between `PolicyHost` (any thread) and `policy-worker` (the thread that owns the ORT
 * sessions), carried by util/worker-rpc.ts: large arrays (parameters, logprobs) travel as
 * transferred ArrayBuffers, never as copies.
 */
import type { PolicyConfig } from './architecture.js';
import type { GenerateRequest, GenerateResult } from './decoder.js';
import type { PolicyRuntimeOptions, TrainRequest } from './policy-runtime.js';

/**
 * What the worker thread starts from: the policy (a checkpoint directory or an in-memory one)
 * and the runtime's options (PolicyRuntimeOptions, declared there once) but its log callback,
 * which cannot cross a thread.
 */
export interface PolicyWorkerInit extends Omit<PolicyRuntimeOptions, 'log'> {
  /** Either a checkpoint directory or an in-memory policy. */
  checkpoint?: string;
  config?: PolicyConfig;
  params?: Record<string, Float32Array>;
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
