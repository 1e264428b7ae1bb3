/**
 * Request/reply over a worker thread, both sides, one protocol. Heavy blocking work (ORT's
 * `session.run`, hnswlib's `searchKnn`) lives in worker threads so the caller's event loop stays
 * free; each such worker is a `serveWorker` and its caller holds a `WorkerClient`.
 *
 *   worker -> caller, once:  { ready: true, value } | { ready: false, error }
 *   caller -> worker:        { id, body } | 'close'          ('close': release, then end)
 *   worker -> caller:        { id, ok: true, value } | { id, ok: false, error }
 *
 * Typed arrays in a value travel as transferred buffers, never as copies.
 */
import { parentPort, type Worker, type WorkerOptions } from 'node:worker_threads';
import { startWorker } from './worker-url.js';

/** An error as it crosses the thread boundary. */
export interface WireError {
  name: string;
  message: string;
  stack?: string;
}

type Ready<R> = { ready: true; value: R } | { ready: false; error: WireError };
type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: WireError };

export function wireError(e: unknown): WireError {
  const err = e instanceof Error ? e : new Error(String(e));
  return { name: err.name, message: err.message, stack: err.stack };
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

export interface WorkerClientOptions {
  /** The caller's error for a worker that failed to start, crashed, exited or was closed. */
  failure: (why: string, cause?: unknown) => Error;
  /** The caller's error for an error the worker replied with (default: `failure(message)`). */
  remote?: (e: WireError) => Error;
  /** `close()` asks the worker to release its resources first, waiting at most this long. */
  graceMs?: number;
}

/** The caller's side: starts the worker, waits for ready, then matches replies to calls by id. */
export class WorkerClient<Req> implements AsyncDisposable {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private stopped: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    private readonly opts: WorkerClientOptions,
  ) {
    worker.on('message', (m: Reply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(this.opts.remote?.(m.error) ?? this.opts.failure(m.error.message));
    });
    worker.on('error', (e) => this.failAll(opts.failure(`crashed: ${e.message}`, e)));
    worker.on('exit', (code) => this.failAll(opts.failure(`exited with code ${code}`)));
  }

  /**
   * Starts `basename` (a module beside `callerUrl`, see worker-url.ts) with `workerData` and
   * resolves once it is ready, with the value it announced; a failed start rejects with the
   * worker's own error (through `remote`) and ends the thread.
   */
  static async start<Req, R>(
    callerUrl: string,
    basename: string,
    workerData: WorkerOptions['workerData'],
    opts: WorkerClientOptions,
  ): Promise<{ client: WorkerClient<Req>; ready: R }> {
    const worker = startWorker(callerUrl, basename, { workerData });
    // Listeners for the start only; the client installs its own once the worker is ready.
    let onMessage!: (m: Ready<R>) => void;
    let onError!: (e: Error) => void;
    let onExit!: (code: number) => void;
    const first = await new Promise<Ready<R>>((resolve, reject) => {
      onMessage = resolve;
      onError = (e) => reject(opts.failure(`failed to start: ${e.message}`, e));
      onExit = (code) => reject(opts.failure(`exited with code ${code} while starting`));
      worker.once('message', onMessage).once('error', onError).once('exit', onExit);
    })
      .catch(async (e) => {
        await worker.terminate();
        throw e;
      })
      .finally(() => {
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      });
    if (!first.ready) {
      await worker.terminate();
      throw opts.remote?.(first.error) ?? opts.failure(first.error.message);
    }
    return { client: new WorkerClient<Req>(worker, opts), ready: first.value };
  }

  /** Sends `body`; resolves with the worker's value. `transfer` moves those buffers instead of copying. */
  call<T>(body: Req, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ id, body }, transfer);
    });
  }

  /** Stops the worker; with `graceMs`, lets it release its resources first. Later calls reject. */
  async close(): Promise<void> {
    if (this.stopped) return;
    this.stopped = this.opts.failure('closed');
    if (this.opts.graceMs === undefined) {
      await this.worker.terminate();
      return;
    }
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.postMessage('close');
    const timeout = setTimeout(() => void this.worker.terminate(), this.opts.graceMs);
    await exited;
    clearTimeout(timeout);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private failAll(e: Error): void {
    this.stopped ??= e;
    for (const p of this.pending.values()) p.reject(this.stopped);
    this.pending.clear();
  }
}

export interface WorkerService<Req, R> {
  /** What the caller's `start` resolves with. */
  ready: R;
  /** Answers one request; calls may overlap (a handler may batch them). */
  handle: (body: Req) => unknown;
  /** Releases resources when the caller closes gracefully. */
  close?: () => Promise<void>;
}

/** The worker's side: runs `start`, announces ready (or why not), then answers each request. */
export function serveWorker<Req, R>(start: () => Promise<WorkerService<Req, R>>): void {
  const port = parentPort;
  if (!port) throw new Error('serveWorker runs in a worker thread (started by WorkerClient.start)');
  start().then(
    (service) => {
      port.postMessage({ ready: true, value: service.ready } satisfies Ready<R>);
      port.on('message', async (m: { id: number; body: Req } | 'close') => {
        if (m === 'close') {
          await service.close?.();
          port.close();
          return;
        }
        try {
          const value = await service.handle(m.body);
          port.postMessage({ id: m.id, ok: true, value } satisfies Reply, transferablesOf(value));
        } catch (e) {
          port.postMessage({ id: m.id, ok: false, error: wireError(e) } satisfies Reply);
        }
      });
    },
    (e) => {
      port.postMessage({ ready: false, error: wireError(e) } satisfies Ready<R>);
      port.close(); // nothing listens: the thread ends
    },
  );
}
