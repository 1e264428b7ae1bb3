/**
 * The caller's handle on a policy running in its own worker thread (policy-worker.ts): decoding,
 * scoring and training happen there, so this thread's event loop stays free while ORT runs.
 *
 *   await using policy = await PolicyHost.start({ checkpoint: dir, device: 'auto' });
 *   const r = await policy.generate({ prompt, maxNewTokens: 64, seed });
 */
import type { Worker } from 'node:worker_threads';
import { startWorker } from '../util/worker-url.js';
import { loadCheckpointConfig } from './checkpoint.js';
import type { Params } from './config.js';
import type { GenerateRequest, GenerateResult } from './decoder.js';
import {
  type PolicyMethod,
  type PolicyReady,
  type PolicyReply,
  type PolicyRequest,
  PolicyWorkerError,
  type PolicyWorkerInit,
  transferablesOf,
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
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: unknown) => void }
  >();
  private exited: string | undefined;

  private constructor(
    private readonly worker: Worker,
    /** The device the worker's sessions run on. */
    readonly device: string,
    /** What the worker logged while starting (device choice, fallbacks). */
    readonly startLog: string[],
  ) {
    worker.on('message', (m: PolicyReply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(new PolicyWorkerError(m.error.name, m.error.message, m.error.stack));
    });
    const fail = (why: string) => {
      this.exited = why;
      for (const p of this.pending.values()) p.reject(new PolicyClosedError(why));
      this.pending.clear();
    };
    worker.on('error', (e) => fail(`crashed: ${e.message}`));
    worker.on('exit', (code) => fail(`exited with code ${code}`));
  }

  /** Starts the worker and waits until its sessions are ready (or throws why they are not). */
  static async start(init: PolicyWorkerInit): Promise<PolicyHost> {
    // A missing or broken config.json fails here, before a thread is spent on it.
    if (init.checkpoint) await loadCheckpointConfig(init.checkpoint);
    const worker = startWorker(import.meta.url, 'policy-worker', { workerData: init });
    // Listeners for the start only; the host installs its own once the worker is ready.
    let onMessage!: (m: PolicyReady) => void;
    let onError!: (e: Error) => void;
    let onExit!: (code: number) => void;
    const ready = await new Promise<PolicyReady>((resolve, reject) => {
      onMessage = resolve;
      onError = reject;
      onExit = (code) => reject(new PolicyClosedError(`exited with code ${code} while starting`));
      worker.once('message', onMessage).once('error', onError).once('exit', onExit);
    }).finally(() => {
      worker.off('message', onMessage).off('error', onError).off('exit', onExit);
    });
    if (!ready.ready) {
      await worker.terminate();
      throw new PolicyWorkerError(ready.error.name, ready.error.message);
    }
    return new PolicyHost(worker, ready.device, ready.log);
  }

  private call<T>(m: PolicyMethod, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.exited) return Promise.reject(new PolicyClosedError(this.exited));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ id, ...m } as PolicyRequest, transfer);
    });
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
  async close(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.postMessage('close');
    const timeout = setTimeout(() => void this.worker.terminate(), 10_000);
    await exited;
    clearTimeout(timeout);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
