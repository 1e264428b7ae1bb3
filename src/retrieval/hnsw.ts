/**
 * The vector index: hnswlib-node's HierarchicalNSW in inner-product space over L2-normalised
 * rows (so inner product = cosine, as in Search-R1's flat e5 index), plus an exact brute-force
 * scan used to verify it. hnswlib's distance in 'ip' space is `1 - <q, x>`; results here are
 * reported as scores `<q, x>`, highest first.
 *
 * hnswlib-node accepts only plain Arrays and its searchKnn blocks the thread, so serving
 * happens in a worker (`HnswWorker`, hnsw-worker.ts); building runs in the caller's thread.
 */
import hnswlib from 'hnswlib-node';
import { WorkerClient } from '../util/worker-rpc.js';

export interface HnswParams {
  /** Links per node: 16 is hnswlib's recommended middle ground for 768-d vectors. */
  m: number;
  /** Candidate list size while building; higher builds slower and recalls better. */
  efConstruction: number;
  /** Seed of the level generator, so a rebuild gives the same graph. */
  seed: number;
}

export const HNSW_DEFAULTS: HnswParams = { m: 16, efConstruction: 200, seed: 100 };

/** Extra candidates fetched per search so that ties at the k-th place resolve by label. */
const TIE_MARGIN = 4;

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
    // hnswlib returns equal distances (duplicate passages) in its own order; a few more
    // candidates, ordered by label within a tie, give the brute-force scan's order.
    const fetch = Math.min(kk + TIE_MARGIN, this.count);
    this.native.setEf(Math.max(ef, fetch));
    const { neighbors, distances } = this.native.searchKnn(Array.from(query), fetch);
    // Its ip distance is 1 - score.
    const hits = neighbors.map((label, i) => ({ label, score: 1 - distances[i] }));
    hits.sort((a, b) => b.score - a.score || a.label - b.label);
    const top = hits.slice(0, kk);
    return { labels: top.map((h) => h.label), scores: top.map((h) => h.score) };
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

/** A request to hnsw-worker.ts: `queries` is [n, dim] row-major. */
export type HnswWorkerRequest = { queries: Float32Array; k: number; ef: number };
/** Its reply: for query q, its hits are `labels/scores[q*k .. q*k + counts[q])`. */
export type HnswWorkerReply = { labels: Int32Array; scores: Float32Array; counts: Int32Array; k: number };

export class HnswWorkerError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'HnswWorkerError';
  }
}

/** An index loaded in a worker thread; many searches may be in flight. */
export class HnswWorker implements AsyncDisposable {
  private constructor(
    private readonly worker: WorkerClient<HnswWorkerRequest>,
    readonly dim: number,
    readonly count: number,
  ) {}

  /** Starts a worker that reads `file` and resolves once the index is loaded. */
  static async start(file: string, dim: number): Promise<HnswWorker> {
    const { client, ready } = await WorkerClient.start<HnswWorkerRequest, number>(
      import.meta.url,
      'hnsw-worker',
      { file, dim },
      {
        failure: (why, cause) => new HnswWorkerError(`hnsw worker for ${file} ${why}`, { cause }),
        remote: (e) => new HnswWorkerError(e.message),
      },
    );
    return new HnswWorker(client, dim, ready);
  }

  /** Top-k for each query row; runs in the worker, so the event loop stays free. */
  async search(queries: Float32Array[], k: number, ef: number): Promise<TopK[]> {
    if (queries.length === 0) return [];
    const packed = stackRows(queries, this.dim);
    const m = await this.worker.call<HnswWorkerReply>({ queries: packed, k, ef }, [
      packed.buffer as ArrayBuffer,
    ]);
    const out: TopK[] = [];
    for (let q = 0; q < queries.length; q++) {
      const c = m.counts[q];
      out.push({
        labels: Array.from(m.labels.subarray(q * m.k, q * m.k + c)),
        scores: Array.from(m.scores.subarray(q * m.k, q * m.k + c)),
      });
    }
    return out;
  }

  close(): Promise<void> {
    return this.worker.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
