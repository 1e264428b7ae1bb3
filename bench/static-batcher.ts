/**
 * The static batcher the policy ran before issue 13 (src/gpu/batcher.ts at 3d4d5eb), kept as the
 * baseline of bench/continuous.ts. Dynamic batching: `generate(request)` calls that arrive concurrently (from many rollouts) wait
 * in a queue and are decoded together. A batch is flushed when it is full, or when the oldest
 * queued request has waited `windowMs`; one batch runs at a time (decoding is sequential on one
 * session), and whatever arrived meanwhile goes into the next. Requests in one batch may differ in
 * prompt length, max new tokens, sampling options and stop sets: the decode loop handles each row.
 */
import type { GenerateRequest, GenerateResult } from '../src/gpu/decoder.js';

export interface BatcherOptions {
  /** Most requests decoded together. */
  maxBatch: number;
  /** How long the first queued request waits for company before its batch starts. */
  windowMs: number;
  /** Rejects a bad request alone (throws) before it can fail a whole batch. */
  validate?: (req: GenerateRequest) => void;
}

export interface BatcherStats {
  batches: number;
  requests: number;
  largestBatch: number;
}

interface Pending {
  req: GenerateRequest;
  resolve: (r: GenerateResult) => void;
  reject: (e: unknown) => void;
}

export class BatcherClosedError extends Error {
  constructor() {
    super('the policy batcher is closed');
    this.name = 'BatcherClosedError';
  }
}

export class Batcher {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private windowElapsed = false;
  private running: Promise<void> | undefined;
  private closed = false;
  readonly stats: BatcherStats = { batches: 0, requests: 0, largestBatch: 0 };

  constructor(
    private readonly decode: (batch: GenerateRequest[]) => Promise<GenerateResult[]>,
    private readonly opts: BatcherOptions,
  ) {
    if (!Number.isInteger(opts.maxBatch) || opts.maxBatch < 1)
      throw new RangeError(`maxBatch must be an integer >= 1, got ${opts.maxBatch}`);
  }

  generate(req: GenerateRequest): Promise<GenerateResult> {
    if (this.closed) return Promise.reject(new BatcherClosedError());
    try {
      this.opts.validate?.(req);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.queue.length === 0) return;
    if (!this.running && (this.queue.length >= this.opts.maxBatch || this.windowElapsed)) {
      this.flush();
      return;
    }
    if (!this.timer && !this.windowElapsed) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.windowElapsed = true;
        this.schedule();
      }, this.opts.windowMs);
    }
  }

  private flush(): void {
    const batch = this.queue.splice(0, this.opts.maxBatch);
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    // Requests left behind have waited at least as long as the window already.
    this.windowElapsed = this.queue.length > 0;
    this.stats.batches++;
    this.stats.requests += batch.length;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
    this.running = this.decode(batch.map((p) => p.req))
      .then(
        (results) => {
          for (const [i, p] of batch.entries()) p.resolve(results[i]);
        },
        (e) => {
          for (const p of batch) p.reject(e);
        },
      )
      .finally(() => {
        this.running = undefined;
        this.schedule();
      });
  }

  /** Stops accepting requests, finishes what is queued, and resolves when idle. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.running || this.queue.length > 0) {
      if (!this.running) this.flush();
      await this.running;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
