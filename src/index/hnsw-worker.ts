/**
 * Worker thread that owns a loaded HNSW index and answers batched top-k searches
 * (hnswlib's searchKnn blocks, so it must not run on the service's event loop).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { HnswIndex, type HnswWorkerReply, type HnswWorkerRequest } from './hnsw.js';

const { file, dim } = workerData as { file: string; dim: number };
const port = parentPort!;

let index: HnswIndex;
try {
  index = HnswIndex.read(file, dim);
  port.postMessage({ ready: index.count });
} catch (e) {
  port.postMessage({ error: (e as Error).message });
  process.exit(0);
}

port.on('message', (m: HnswWorkerRequest) => {
  try {
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
    const reply: HnswWorkerReply = { id: m.id, labels, scores, counts, k: m.k };
    port.postMessage(reply, [labels.buffer, scores.buffer, counts.buffer]);
  } catch (e) {
    port.postMessage({ id: m.id, error: (e as Error).message } satisfies HnswWorkerReply);
  }
});
