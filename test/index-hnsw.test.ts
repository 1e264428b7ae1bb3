import { join } from 'node:path';
import t from 'tap';
import { bruteForceTopK, HnswIndex, HnswWorker, stackRows } from '../src/retrieval/hnsw.js';
import { Rng } from '../src/util/rng.js';
import { tmpDir } from './fixtures/index/tmp-corpus.js';

/** n unit rows of dim d around a few random centres (so neighbours are meaningful). */
function clustered(n: number, dim: number, seed: number): Float32Array[] {
  const rng = new Rng(seed);
  const centres = Array.from({ length: 8 }, () => Float32Array.from({ length: dim }, () => rng.normal()));
  return Array.from({ length: n }, () => {
    const c = rng.pick(centres);
    const row = Float32Array.from(c, (v) => v + 0.6 * rng.normal());
    const norm = Math.hypot(...row);
    return row.map((v) => v / norm);
  });
}

t.test('bruteForceTopK equals a sort of all inner products', async (t) => {
  const rows = clustered(300, 16, 1);
  const m = stackRows(rows, 16);
  const q = clustered(1, 16, 2)[0];
  const all = rows
    .map((r, i) => ({ i, s: r.reduce((acc, v, j) => acc + v * q[j], 0) }))
    .sort((a, b) => b.s - a.s || a.i - b.i);
  const top = bruteForceTopK(m, 16, q, 5);
  t.same(
    top.labels,
    all.slice(0, 5).map((x) => x.i),
  );
  t.ok(
    top.scores.every((s, j) => Math.abs(s - all[j].s) < 1e-5),
    'scores are the inner products',
  );
  t.same(bruteForceTopK(m.subarray(0, 2 * 16), 16, q, 5).labels.length, 2, 'k is capped at n');
});

t.test('HNSW top-3 equals brute force on a small set, in the thread and in the worker', async (t) => {
  const dim = 32;
  const rows = clustered(2000, dim, 3);
  const queries = clustered(100, dim, 4);
  const index = HnswIndex.create(dim, 1000, { m: 16, efConstruction: 200, seed: 7 }); // grows past 1000
  for (const [i, r] of rows.entries()) index.add(r, i);
  t.equal(index.count, 2000);
  const m = stackRows(rows, dim);
  const exact = queries.map((q) => bruteForceTopK(m, dim, q, 3));
  const approx = queries.map((q) => index.search(q, 3, 200));
  t.same(
    approx.map((a) => a.labels),
    exact.map((e) => e.labels),
    'same top-3 labels in the same order',
  );
  const maxDiff = Math.max(
    ...approx.flatMap((a, i) => a.scores.map((s, j) => Math.abs(s - exact[i].scores[j]))),
  );
  t.ok(maxDiff < 1e-5, `scores match brute force (max diff ${maxDiff})`);

  const file = join(tmpDir(), 'hnsw.bin');
  index.write(file);
  const worker = await HnswWorker.start(file, dim);
  t.equal(worker.count, 2000);
  const fromWorker = await worker.search(queries, 3, 200);
  t.same(
    fromWorker.map((a) => a.labels),
    exact.map((e) => e.labels),
    'the worker loads the saved index and agrees',
  );
  await worker.close();
  await t.rejects(worker.search(queries, 3, 64), /closed/);
});

t.test('a missing index file fails the worker start with the file name', async (t) => {
  await t.rejects(HnswWorker.start(join(tmpDir(), 'nope.bin'), 8), /nope\.bin/);
});
