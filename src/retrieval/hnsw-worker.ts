/**
 * Worker thread that owns a loaded HNSW index and answers batched top-k searches
 * (hnswlib's searchKnn blocks, so it must not run on the service's event loop).
 */
import { workerData } from 'node:worker_threads';
import { serveWorker } from '../util/worker-rpc.js';
import { HnswIndex, type HnswWorkerReply, type HnswWorkerRequest } from './hnsw.js';

const { file, dim } = workerData as { file: string; dim: number };

serveWorker<HnswWorkerRequest, number>(async () => {
  let index: HnswIndex;
  try {
    index = HnswIndex.read(file, dim);
  } catch (e) {
    throw new Error(`cannot load HNSW index ${file}: ${(e as Error).message}`, { cause: e });
  }
  const search = (m: HnswWorkerRequest): HnswWorkerReply => {
    const n = m.queries.length / dim;
    const labels = new Int32Array(n * m.k);
    const scores = new Float32Array(n * m.k);
    const counts = new Int32Array(n);
    for (let q = 0; q < n; q++) {
      const hit = index.search(m.queries.subarray(q * dim, (q + 1) * dim), m.k, m.ef);
      counts[q] = hit.labels.length;
      labels.set(hit.labels, q * m.k);
      scores.set(hit.scores, q * m.k);
    }
    return { labels, scores, counts, k: m.k };
  };
  return { ready: index.count, handle: search };
});
