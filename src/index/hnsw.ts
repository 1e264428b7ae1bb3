/**
 * The vector index: hnswlib-node's HierarchicalNSW in inner-product space over L2-normalised
 * rows (so inner product = cosine, as in Search-R1's flat e5 index), plus an exact brute-force
 * scan used to verify it. hnswlib's distance in 'ip' space is `1 - <q, x>`; results here are
 * reported as scores `<q, x>`, highest first.
 *
 * hnswlib-node accepts only plain Arrays and its searchKnn blocks the thread, so serving
 * happens in a worker (`HnswWorker`, hnsw-worker.ts); building runs in the caller's thread.
 */
import type { Worker } from 'node:worker_threads';
import hnswlib from 'hnswlib-node';
import { startWorker } from '../util/worker-url.js';

export interface HnswParams {
  /** Links per node: 16 is hnswlib's recommended middle ground for 768-d vectors. */
  m: number;
  /** Candidate list size while building; higher builds slower and recalls better. */
  efConstruction: number;
  /** Seed of the level generator, so a rebuild gives the same graph. */
  seed: number;
}

export const HNSW_DEFAULTS: HnswParams = { m: 16, efConstruction: 200, seed: 100 };

/** Top-k of one query: labels (row numbers) and inner-product scores, best first. */
export interface TopK {
  labels: number[];
  scores: number[];
}

export class HnswIndex {
  readonly native: hnswlib.HierarchicalNSW;

  private constructor(
    readonly dim: number,
    native: hnswlib.HierarchicalNSW,
  ) {
    this.native = native;
  }

  static create(dim: number, maxElements: number, params: HnswParams = HNSW_DEFAULTS): HnswIndex {
    const native = new hnswlib.HierarchicalNSW('ip', dim);
    native.initIndex({
      maxElements: Math.max(maxElements, 1),
      m: params.m,
      efConstruction: params.efConstruction,
      randomSeed: params.seed,
    });
    return new HnswIndex(dim, native);
  }

  static read(file: string, dim: number): HnswIndex {
    const native = new hnswlib.HierarchicalNSW('ip', dim);
    native.readIndexSync(file);
    return new HnswIndex(dim, native);
  }

  get count(): number {
    return this.native.getCurrentCount();
  }

  /** Adds one row under `label` (its row number in the passage store). */
  add(row: Float32Array, label: number): void {
    if (row.length !== this.dim)
      throw new RangeError(`hnsw: row has ${row.length} values, index dim is ${this.dim}`);
    if (this.native.getCurrentCount() >= this.native.getMaxElements())
      this.native.resizeIndex(Math.ceil(this.native.getMaxElements() * 1.5) + 16);
    this.native.addPoint(Array.from(row), label);
  }

  write(file: string): void {
    this.native.writeIndexSync(file);
  }

  /** Top-k by inner product; `ef` (>= k) trades speed for recall. */
  search(query: Float32Array, k: number, ef: number): TopK {
    const kk = Math.min(k, this.count);
    if (kk <= 0) return { labels: [], scores: [] };
    this.native.setEf(Math.max(ef, kk));
    const { neighbors, distances } = this.native.searchKnn(Array.from(query), kk);
    // hnswlib returns nearest first already; its ip distance is 1 - score.
    return { labels: neighbors, scores: distances.map((d) => 1 - d) };
  }
}

/**
 * Exact top-k by inner product over `n` rows of `matrix` ([n, dim], row-major). A plain loop
 * with a small sorted buffer: the baseline that HNSW recall and speed are measured against.
 * Ties go to the lower label.
 */
export function bruteForceTopK(matrix: Float32Array, dim: number, query: Float32Array, k: number): TopK {
  const n = Math.floor(matrix.length / dim);
  const kk = Math.min(k, n);
  const labels: number[] = [];
  const scores: number[] = [];
  for (let r = 0; r < n; r++) {
    let s = 0;
    const base = r * dim;
    for (let j = 0; j < dim; j++) s += matrix[base + j] * query[j];
    if (labels.length === kk && s <= scores[kk - 1]) continue;
    let pos = labels.length === kk ? kk - 1 : labels.length;
    if (labels.length < kk) {
      labels.push(r);
      scores.push(s);
    }
    while (pos > 0 && scores[pos - 1] < s) {
      labels[pos] = labels[pos - 1];
      scores[pos] = scores[pos - 1];
      pos--;
    }
    labels[pos] = r;
    scores[pos] = s;
  }
  return { labels, scores };
}

/** Packs rows into one [n, dim] matrix. */
export function stackRows(rows: Float32Array[], dim: number): Float32Array {
  const out = new Float32Array(rows.length * dim);
  for (let i = 0; i < rows.length; i++) out.set(rows[i], i * dim);
  return out;
}

// ---- the search worker client -------------------------------------------------------------

/** Messages to hnsw-worker.ts. */
export type HnswWorkerRequest = { id: number; queries: Float32Array; k: number; ef: number };
/** Replies: for query q, its hits are `labels/scores[q*k .. q*k + counts[q])`. */
export type HnswWorkerReply =
  | { id: number; labels: Int32Array; scores: Float32Array; counts: Int32Array; k: number }
  | { id: number; error: string };

export class HnswWorkerError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'HnswWorkerError';
  }
}

/** An index loaded in a worker thread; many searches may be in flight. */
export class HnswWorker implements AsyncDisposable {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (r: TopK[]) => void; reject: (e: Error) => void; n: number }
  >();
  private failure: Error | null = null;

  private constructor(
    private readonly worker: Worker,
    readonly dim: number,
    readonly count: number,
  ) {
    worker.on('message', (m: HnswWorkerReply) => this.onReply(m));
    worker.on('error', (e) =>
      this.failAll(new HnswWorkerError(`hnsw worker crashed: ${e.message}`, { cause: e })),
    );
    worker.on('exit', (code) => this.failAll(new HnswWorkerError(`hnsw worker exited (code ${code})`)));
  }

  /** Starts a worker that reads `file` and resolves once the index is loaded. */
  static async start(file: string, dim: number): Promise<HnswWorker> {
    const worker = startWorker(import.meta.url, 'hnsw-worker', { workerData: { file, dim } });
    const count = await new Promise<number>((resolve, reject) => {
      const onError = (e: Error) =>
        reject(new HnswWorkerError(`cannot load HNSW index ${file}: ${e.message}`, { cause: e }));
      worker.once('error', onError);
      worker.once('message', (m: { ready?: number; error?: string }) => {
        worker.off('error', onError);
        if (m.error !== undefined) reject(new HnswWorkerError(`cannot load HNSW index ${file}: ${m.error}`));
        else resolve(m.ready ?? 0);
      });
    }).catch(async (e) => {
      await worker.terminate();
      throw e;
    });
    return new HnswWorker(worker, dim, count);
  }

  /** Top-k for each query row; runs in the worker, so the event loop stays free. */
  search(queries: Float32Array[], k: number, ef: number): Promise<TopK[]> {
    if (this.failure) return Promise.reject(this.failure);
    if (queries.length === 0) return Promise.resolve([]);
    const id = this.nextId++;
    const packed = stackRows(queries, this.dim);
    return new Promise<TopK[]>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, n: queries.length });
      const msg: HnswWorkerRequest = { id, queries: packed, k, ef };
      this.worker.postMessage(msg, [packed.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    this.failure ??= new HnswWorkerError('hnsw worker closed');
    await this.worker.terminate();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private onReply(m: HnswWorkerReply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if ('error' in m) {
      p.reject(new HnswWorkerError(m.error));
      return;
    }
    const out: TopK[] = [];
    for (let q = 0; q < p.n; q++) {
      const c = m.counts[q];
      out.push({
        labels: Array.from(m.labels.subarray(q * m.k, q * m.k + c)),
        scores: Array.from(m.scores.subarray(q * m.k, q * m.k + c)),
      });
    }
    p.resolve(out);
  }

  private failAll(e: Error): void {
    this.failure ??= e;
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
  }
}
