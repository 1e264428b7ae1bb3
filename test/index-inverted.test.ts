import { join } from 'node:path';
import t from 'tap';
import { bruteForceTopK, stackRows } from '../src/retrieval/hnsw.js';
import { InvertedRows } from '../src/retrieval/inverted.js';
import { IndexSearcher } from '../src/retrieval/searcher.js';
import { buildIndex } from '../src/retrieval/store.js';
import { Rng } from '../src/util/rng.js';
import { tmpDir, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';
import { WIKI_PASSAGES, WIKI_QUESTIONS } from './fixtures/index/wiki-passages.js';

const f32 = (xs: number[]) => Float32Array.from(xs);

t.test('hand-worked: touched rows by score, untouched rows score 0 above negative ones', async (t) => {
  // r0 = e0, r1 = 0.5 e1, r2 = 0, r3 = -0.25 e0, r4 = e0 (a duplicate of r0).
  const rows = [
    f32([1, 0, 0, 0]),
    f32([0, 0.5, 0, 0]),
    f32([0, 0, 0, 0]),
    f32([-0.25, 0, 0, 0]),
    f32([1, 0, 0, 0]),
  ];
  const view = InvertedRows.fromRows(rows, 4);
  // q = e0 + e1: r0 1, r4 1 (tie: lower label first), r1 0.5, r2 0, r3 -0.25.
  t.same(view.search(f32([1, 1, 0, 0]), 5), { labels: [0, 4, 1, 2, 3], scores: [1, 1, 0.5, 0, -0.25] });
  // q = e0: r1 and r2 are untouched (0) and outrank r3 (-0.25).
  t.same(view.search(f32([1, 0, 0, 0]), 4), { labels: [0, 4, 1, 2], scores: [1, 1, 0, 0] });
  // q = -e0: r3 0.25 first, then the untouched rows by label, then r0 and r4 at -1.
  t.same(view.search(f32([-1, 0, 0, 0]), 5), { labels: [3, 1, 2, 0, 4], scores: [0.25, 0, 0, -1, -1] });
  t.same(view.search(f32([0, 0, 1, 0]), 2), { labels: [0, 1], scores: [0, 0] }, 'no row touched');
  t.same(view.search(f32([1, 1, 0, 0]), 9).labels.length, 5, 'k beyond the rows: every row once');
  t.same(view.search(f32([1, 1, 0, 0]), 0), { labels: [], scores: [] });
  t.throws(() => view.search(f32([1, 0]), 1), /query has 2 values, rows have 4/);
});

t.test('random sparse rows: labels and scores equal the dense brute-force scan', async (t) => {
  const rng = new Rng(12);
  const dim = 64;
  const sparse = (nonZero: number) => {
    const row = new Float32Array(dim);
    for (let i = 0; i < nonZero; i++) row[rng.int(dim)] = rng.float() * 2 - 1;
    return row;
  };
  const rows = Array.from({ length: 300 }, () => sparse(1 + rng.int(8)));
  // A few repeated rows, so that ties at the k-th place occur.
  for (let i = 0; i < 20; i++) rows.push(Float32Array.from(rows[rng.int(rows.length)]));
  const view = InvertedRows.fromRows(rows, dim);
  const matrix = stackRows(rows, dim);
  let compared = 0;
  for (let q = 0; q < 200; q++) {
    const query = sparse(1 + rng.int(6));
    for (const k of [1, 3, 10, rows.length + 5]) {
      const want = bruteForceTopK(matrix, dim, query, k);
      const got = view.search(query, k);
      if (JSON.stringify(got) !== JSON.stringify(want))
        t.fail(`query ${q} k ${k}: ${JSON.stringify({ got, want })}`);
      else compared++;
    }
  }
  t.equal(compared, 800, 'all 800 searches identical');
});

t.test('an index opened exact answers as the brute-force scan over its rows', async (t) => {
  const dir = tmpDir();
  const out = join(dir, 'wiki-index');
  await buildIndex({ corpus: writeWikiCorpus(dir), out, embedder: { kind: 'lexical' }, progress: false });
  await using exact = await IndexSearcher.open(out, { exact: true });
  t.equal(exact.method, 'exact');
  const embedder = exact.embedder;
  const rows = await embedder.embedPassages(WIKI_PASSAGES.map((p) => p.contents));
  const matrix = stackRows(rows, embedder.dim);
  const queries = WIKI_QUESTIONS.map((q) => q.question);
  const found = await exact.search(queries, 3);
  const qRows = await embedder.embedQueries(queries);
  for (const [i, q] of queries.entries()) {
    const want = bruteForceTopK(matrix, embedder.dim, qRows[i], 3);
    t.same(
      found[i].map((h) => [h.id, h.score]),
      want.labels.map((l, j) => [WIKI_PASSAGES[l].id, want.scores[j]]),
      q,
    );
  }
  await using graph = await IndexSearcher.open(out);
  t.equal(graph.method, 'hnsw', 'without exact: the HNSW graph');
});
