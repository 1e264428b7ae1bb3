/**
 * The caller's handle on a policy running in its own worker thread (policy-worker.ts): decoding,
 * scoring and training happen there, so this thread's event loop stays free while ORT runs.
 *
 *   await using policy = await PolicyHost.start({ checkpoint: dir, device: 'auto' });
 *   const r = await policy.generate({ prompt, maxNewTokens: 64, seed });
 */
import { transferablesOf, WorkerClient } from '../util/worker-rpc.js';
import { loadCheckpointConfig } from './checkpoint.js';
import type { Params } from './config.js';
import type { GenerateRequest, GenerateResult } from './decoder.js';
import {
  type PolicyMethod,
  type PolicyReady,
  PolicyWorkerError,
  type PolicyWorkerInit,
} from './policy-protocol.js';
import type { PolicyInfo, TrainRequest } from './policy-runtime.js';
import type { TrainMetrics } from './trainer.js';

export class PolicyClosedError extends Error {
  constructor(why: string) {
    super(`the policy worker is not running (${why})`);
    this.name = 'PolicyClosedError';
  }
}

export class PolicyHost {
  private constructor(
    private readonly worker: WorkerClient<PolicyMethod>,
    /** The device the worker's sessions run on. */
    readonly device: string,
    /** What the worker logged while starting (device choice, fallbacks). */
    readonly startLog: string[],
  ) {}

  /** Starts the worker and waits until its sessions are ready (or throws why they are not). */
  static async start(init: PolicyWorkerInit): Promise<PolicyHost> {
    // A missing or broken config.json fails here, before a thread is spent on it.
    if (init.checkpoint) await loadCheckpointConfig(init.checkpoint);
    const { client, ready } = await WorkerClient.start<PolicyMethod, PolicyReady>(
      import.meta.url,
      'policy-worker',
      init,
      {
        failure: (why) => new PolicyClosedError(why),
        remote: (e) => new PolicyWorkerError(e.name, e.message, e.stack),
        graceMs: 10_000, // queued work finishes and the sessions are released
      },
    );
    return new PolicyHost(client, ready.device, ready.log);
  }

  private call<T>(m: PolicyMethod, transfer: ArrayBuffer[] = []): Promise<T> {
    return this.worker.call<T>(m, transfer);
  }

  /** Decodes one request; concurrent calls are batched inside the worker. */
  generate(req: GenerateRequest): Promise<GenerateResult> {
    return this.call({ method: 'generate', args: [req] });
  }

  /** log p(x_t | x_<t), t = 1..L-1, per sequence. */
  logprobs(sequences: number[][]): Promise<number[][]> {
    return this.call({ method: 'logprobs', args: [sequences] });
  }

  /**
   * One optimizer step; the policy then decodes with the new parameters. With `transfer`, the
   * batch's typed arrays move to the worker instead of being copied (they are detached here).
   */
  trainStep(req: TrainRequest, opts: { transfer?: boolean } = {}): Promise<TrainMetrics> {
    return this.call({ method: 'trainStep', args: [req] }, opts.transfer ? transferablesOf(req) : []);
  }

  async getParams(): Promise<Params> {
    return new Map(
      Object.entries(await this.call<Record<string, Float32Array>>({ method: 'getParams', args: [] })),
    );
  }

  /** Replaces the policy's parameters (copied to the worker; the caller keeps its arrays). */
  setParams(params: Params): Promise<void> {
    return this.call({ method: 'setParams', args: [Object.fromEntries(params)] });
  }

  loadCheckpoint(dir: string): Promise<void> {
    return this.call({ method: 'loadCheckpoint', args: [dir] });
  }

  /** Requests naming policy `version` decode on the current parameters from now on (newest `keep` kept). */
  holdVersion(version: number, keep: number): Promise<void> {
    return this.call({ method: 'holdVersion', args: [version, keep] });
  }

  /** Loads checkpoint `dir` as policy `version` for decoding only (newest `keep` kept). */
  loadVersion(version: number, dir: string, keep: number): Promise<void> {
    return this.call({ method: 'loadVersion', args: [version, dir, keep] });
  }

  saveCheckpoint(dir: string): Promise<void> {
    return this.call({ method: 'saveCheckpoint', args: [dir] });
  }

  info(): Promise<PolicyInfo> {
    return this.call({ method: 'info', args: [] });
  }

  /** Test hook: blocks the worker thread for `ms`, as a long decode does. */
  busyWorker(ms: number): Promise<void> {
    return this.call({ method: 'sleep', args: [ms] });
  }

  /** Lets queued work finish, releases the sessions and stops the thread. */
  close(): Promise<void> {
    return this.worker.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
