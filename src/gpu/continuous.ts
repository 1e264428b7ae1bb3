/**
 * Continuous batching: `generate(request)` calls from many rollouts share one running batch, and
 * requests join and leave it at every decode step. A rollout that comes back from a tool call
 * continues at the next step instead of waiting for the whole batch to finish.
 *
 * One iteration of the loop:
 *   1. admit queued requests, oldest first, while the batch has fewer than `maxBatch` rows and the
 *      iteration's tokens (one per running row + each admitted prompt) fit `maxBatchTokens`;
 *   2. prefill the admitted prompts together (one forward) and sample their first tokens;
 *   3. one decode step for every row; rows that stop leave the batch, their callers get the result;
 *   4. yield to the event loop (setImmediate), so requests that arrived meanwhile are queued
 *      before the next admission (session.run blocks this thread while a forward runs).
 * A row's tokens depend only on its own request (seeded Rng, own positions and mask), so a
 * request decodes to what it would alone, whatever joins or leaves around it.
 *
 * New parameters (`paramsVersion` changes) stop admissions: the running rows finish on the
 * version they started with, then the next batch opens on the new one; no trajectory mixes two.
 *
 * A request that names a policy version (GenerateRequest.version) goes to that version's lane: one
 * batch per version in flight, on the parameters the backend holds for it (holdVersion), so an
 * asynchronous run's rollouts of versions k-1 and k decode side by side and a new version starts
 * decoding without waiting for the old one's rows. Each iteration prefills each lane's joining
 * prompts, then steps every lane's rows in one pass when the backend can (`stepMany`: one forward
 * for all versions in flight, each batch getting what its own step would, to the bit), else one
 * step per lane. The token budget holds per lane (per batch). Unversioned requests share the lane
 * of the current parameters, as above.
 */
import {
  type DecodeBackend,
  DecodeRow,
  type GenerateRequest,
  type GenerateResult,
  type RowBatch,
  survivors,
} from './decoder.js';
import type { Detokenize } from './stop.js';

export interface ContinuousOptions {
  /** Most rows decoding together. */
  maxBatch: number;
  /**
   * Most tokens one iteration feeds the model: one per running row plus the prompts it prefills
   * (vLLM's max_num_batched_tokens). A prompt longer than this still runs, alone.
   */
  maxBatchTokens: number;
  /** How long an idle decoder waits for company before its first prefill. */
  windowMs: number;
  /** Rejects a bad request alone (throws) before it can fail a batch. */
  validate?: (req: GenerateRequest) => void;
  detokenize?: Detokenize;
}

export interface ContinuousStats {
  requests: number;
  /** Forwards over admitted prompts (several prompts each). */
  prefills: number;
  steps: number;
  /** Most rows in one step. */
  largestBatch: number;
  /** Most tokens one iteration fed the model (prefill + step). */
  largestIterationTokens: number;
  /** Requests admitted while other rows were mid-decode. */
  joinedRunning: number;
  /** Decode steps that handed several versions' batches to DecodeBackend.stepMany (one pass on the cached step graph). */
  sharedPasses: number;
}

export class DecoderClosedError extends Error {
  constructor() {
    super('the policy decoder is closed');
    this.name = 'DecoderClosedError';
  }
}

interface Pending {
  req: GenerateRequest;
  resolve: (r: GenerateResult) => void;
  reject: (e: unknown) => void;
}

interface Running {
  row: DecodeRow;
  caller: Pending;
}

/** The requests of one policy version (or of the current parameters: key null) and their batch. */
interface Lane {
  key: number | null;
  queue: Pending[];
  /** In the batch's row order. */
  running: Running[];
  batch: RowBatch | undefined;
  /** Tokens fed to the model for this lane in the current iteration (prefill + step). */
  fed: number;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class ContinuousBatcher {
  /** By version key, the current parameters' lane (null) first when there is one. */
  private readonly lanes = new Map<number | null, Lane>();
  private loop: Promise<void> | undefined;
  private closed = false;
  readonly stats: ContinuousStats = {
    requests: 0,
    prefills: 0,
    steps: 0,
    largestBatch: 0,
    largestIterationTokens: 0,
    joinedRunning: 0,
    sharedPasses: 0,
  };

  constructor(
    /** The backend (created on first use: the runtime builds its sessions lazily). */
    private readonly backend: () => Promise<DecodeBackend>,
    private readonly opts: ContinuousOptions,
  ) {
    if (!Number.isInteger(opts.maxBatch) || opts.maxBatch < 1)
      throw new RangeError(`maxBatch must be an integer >= 1, got ${opts.maxBatch}`);
    if (!(opts.maxBatchTokens >= 1))
      throw new RangeError(`maxBatchTokens must be >= 1, got ${opts.maxBatchTokens}`);
  }

  generate(req: GenerateRequest): Promise<GenerateResult> {
    if (this.closed) return Promise.reject(new DecoderClosedError());
    try {
      this.opts.validate?.(req);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      const key = req.version ?? null;
      let lane = this.lanes.get(key);
      if (!lane) {
        lane = { key, queue: [], running: [], batch: undefined, fed: 0 };
        this.lanes.set(key, lane);
      }
      lane.queue.push({ req, resolve, reject });
      this.stats.requests++;
      this.start();
    });
  }

  private queued(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.queue.length;
    return n;
  }

  private start(): void {
    this.loop ??= this.run().finally(() => {
      this.loop = undefined;
      if (this.queued() > 0) this.start();
    });
  }

  private async run(): Promise<void> {
    // An idle decoder waits a moment so that a burst of requests shares its first prefill.
    if (this.queued() < this.opts.maxBatch && this.opts.windowMs > 0)
      await new Promise((r) => setTimeout(r, this.opts.windowMs));
    let backend: DecodeBackend;
    try {
      backend = await this.backend();
    } catch (e) {
      for (const lane of this.lanes.values()) for (const p of lane.queue.splice(0)) p.reject(e);
      this.lanes.clear();
      return;
    }
    while (this.lanes.size > 0) {
      const stepping: Lane[] = [];
      for (const lane of [...this.lanes.values()]) {
        try {
          await this.prefillJoining(backend, lane);
          if (lane.running.length > 0) stepping.push(lane);
        } catch (e) {
          this.failRows(lane, e);
        }
      }
      await this.step(backend, stepping);
      for (const lane of [...this.lanes.values()]) {
        this.stats.largestIterationTokens = Math.max(this.stats.largestIterationTokens, lane.fed);
        if (lane.queue.length === 0 && lane.running.length === 0) this.lanes.delete(lane.key);
      }
      await nextTurn();
    }
  }

  /** A failed forward (or unusable logits) fails the rows in it; queued requests go on. */
  private failRows(lane: Lane, e: unknown): void {
    for (const r of lane.running) r.caller.reject(e);
    lane.running = [];
    lane.batch = undefined;
  }

  /**
   * One decode step for every lane's rows: one pass for all of them when the backend can run
   * several batches at once (stepMany: the versions in flight), else one step per lane.
   */
  private async step(backend: DecodeBackend, lanes: Lane[]): Promise<void> {
    const V = backend.vocabSize;
    for (const lane of lanes) {
      lane.fed += lane.running.length;
      this.stats.steps++;
      this.stats.largestBatch = Math.max(this.stats.largestBatch, lane.running.length);
    }
    if (lanes.length > 1 && backend.stepMany) {
      let logits: Float32Array[];
      try {
        this.stats.sharedPasses++;
        logits = await backend.stepMany(
          lanes.map((lane) => ({ batch: lane.batch!, tokens: lane.running.map((r) => r.row.next) })),
        );
      } catch (e) {
        for (const lane of lanes) this.failRows(lane, e);
        return;
      }
      for (const [k, lane] of lanes.entries()) {
        try {
          this.finishRows(lane, lane.batch!, logits[k], 0, V);
        } catch (e) {
          this.failRows(lane, e);
        }
      }
      return;
    }
    for (const lane of lanes) {
      try {
        const batch = lane.batch!;
        this.finishRows(lane, batch, await batch.step(lane.running.map((r) => r.row.next)), 0, V);
      } catch (e) {
        this.failRows(lane, e);
      }
    }
  }

  /** The queued requests that join now (oldest first), started as rows; bad ones are rejected. */
  private admit(backend: DecodeBackend, lane: Lane, batch: RowBatch): Running[] {
    // New parameters: the running rows finish on theirs before anything joins (a version's lane
    // runs on that version's parameters, which do not change).
    if (lane.key === null && batch.version !== backend.paramsVersion) return [];
    const admitted: Running[] = [];
    let tokens = lane.running.length;
    while (lane.queue.length > 0 && lane.running.length + admitted.length < this.opts.maxBatch) {
      const next = lane.queue[0];
      const cost = next.req.prompt.length + 1; // its prompt, then its first step
      if (tokens > 0 && tokens + cost > this.opts.maxBatchTokens) break;
      lane.queue.shift();
      try {
        admitted.push({ row: new DecodeRow(next.req, backend, this.opts.detokenize), caller: next });
        tokens += cost;
      } catch (e) {
        next.reject(e);
      }
    }
    return admitted;
  }

  /** Opens the lane's batch when it has none and prefills the requests that join it now. */
  private async prefillJoining(backend: DecodeBackend, lane: Lane): Promise<void> {
    lane.fed = 0;
    // An empty batch is replaced: it picks up new parameters and sheds the capacity it grew to.
    if (!lane.batch || lane.running.length === 0) {
      try {
        lane.batch = backend.open(lane.key ?? undefined);
      } catch (e) {
        // A version the backend does not hold: its requests fail, other lanes go on.
        for (const p of lane.queue.splice(0)) p.reject(e);
        lane.batch = undefined;
        return;
      }
    }
    const batch = lane.batch;
    const joined = this.admit(backend, lane, batch);
    if (joined.length === 0) return;
    if (lane.running.length > 0) this.stats.joinedRunning += joined.length;
    this.stats.prefills++;
    lane.running.push(...joined); // before the forward: a failure rejects them too
    const prompts = joined.map((r) => r.row.req.prompt);
    lane.fed += prompts.reduce((a, p) => a + p.length, 0);
    const logits = await batch.prefill(
      prompts,
      joined.map((r) => r.row.slots),
    );
    this.finishRows(lane, batch, logits, lane.running.length - joined.length, backend.vocabSize);
  }

  /**
   * Samples rows `from ..` of the batch from `logits` (batch row b is logits row b - from); rows
   * that stop leave the batch and their callers get their results.
   */
  private finishRows(lane: Lane, batch: RowBatch, logits: Float32Array, from: number, V: number): void {
    const alive = lane.running.map((r, b) => {
      if (b < from) return true;
      const done = r.row.advance(logits, b - from, V);
      if (done) r.caller.resolve(done);
      return !done;
    });
    const keep = survivors(alive);
    if (keep.length < lane.running.length) {
      batch.keepRows(keep);
      lane.running = keep.map((b) => lane.running[b]);
    }
  }

  /** Stops accepting requests, finishes the running and queued ones, and resolves when idle. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.loop) await this.loop;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
