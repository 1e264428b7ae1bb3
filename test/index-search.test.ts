import { join } from 'node:path';
import t from 'tap';
import { LexicalEmbedder } from '../src/retrieval/lexical.js';
import { EmbedderMismatchError, IndexSearcher } from '../src/retrieval/searcher.js';
import { buildIndex, IndexNotFoundError, readMeta } from '../src/retrieval/store.js';
import { tmpDir, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';
import { WIKI_PASSAGES, WIKI_QUESTIONS } from './fixtures/index/wiki-passages.js';

const dir = tmpDir();
const out = join(dir, 'wiki-index');

let searcher: IndexSearcher;

// One searcher for the retrieval tests: each open starts an HNSW worker thread.
t.before(async () => {
  await buildIndex({ corpus: writeWikiCorpus(dir), out, embedder: { kind: 'lexical' }, progress: false });
  searcher = await IndexSearcher.open(out);
});

t.teardown(async () => {
  await searcher.close();
});

t.test('meta.json records the embedder fingerprint, dim, count and HNSW settings', async (t) => {
  const meta = await readMeta(out);
  t.match(meta, {
    format: 'akbe-index/1',
    embedder: 'lexical',
    dim: 1024,
    count: WIKI_PASSAGES.length,
    M: 16,
    efConstruction: 200,
  });
  t.match(meta.fingerprint, /^lexical\(dim=1024,buckets=262144,ngrams=2,docs=32,df=[0-9a-f]{8}\)$/);
});

t.test('lexical retrieval puts the passage first for every entity-name query', async (t) => {
  const titles = WIKI_PASSAGES.map((p) => p.contents.split('\n')[0]);
  const results = await searcher.search(titles, 1);
  t.same(
    results.map((r) => r[0].id),
    WIKI_PASSAGES.map((p) => p.id),
  );
  t.equal(results[0][0].title, 'Depeche Mode');
  t.equal(results[0][0].contents, WIKI_PASSAGES[0].contents);
});

t.test('real QA questions find their answering passage in the top 3 (and mostly first)', async (t) => {
  const results = await searcher.search(
    WIKI_QUESTIONS.map((q) => q.question),
    3,
  );
  const ranks = results.map((hits, i) => hits.findIndex((h) => h.id === WIKI_QUESTIONS[i].answerId));
  t.same(
    ranks.filter((r) => r < 0),
    [],
    'every answer in the top 3',
  );
  t.ok(ranks.filter((r) => r === 0).length >= 12, `first for most questions (ranks ${ranks})`);
  t.ok(
    results.every((hits) => hits[0].score >= hits[1].score && hits[1].score >= hits[2].score),
    'scores descend',
  );
});

t.test('k larger than the corpus returns every passage once', async (t) => {
  const [hits] = await searcher.search(['anything at all'], 100);
  t.equal(hits.length, WIKI_PASSAGES.length);
  t.equal(new Set(hits.map((h) => h.id)).size, WIKI_PASSAGES.length);
});

t.test('opening the index with another embedder is refused with a clear message', async (t) => {
  const other = LexicalEmbedder.fit(['some other corpus', 'with other statistics']);
  const err = await IndexSearcher.open(out, { embedder: other }).catch((e) => e);
  t.ok(err instanceof EmbedderMismatchError, `got ${err}`);
  t.match(
    err.message,
    /^index at .*wiki-index was built with embedder lexical\(dim=1024,.*\) but the query embedder is lexical\(dim=1024,buckets=262144,ngrams=2,docs=2,/,
  );
  const e5like = {
    name: 'e5',
    dim: 1024,
    fingerprint: 'e5(model=abc,vocab=def,maxLen=256,dim=1024,pool=mean)',
  } as never;
  await t.rejects(IndexSearcher.open(out, { embedder: e5like }), /but the query embedder is e5\(model=abc/);
});

t.test('a directory without an index is reported with the build command', async (t) => {
  const err = await IndexSearcher.open(dir).catch((e) => e);
  t.ok(err instanceof IndexNotFoundError);
  t.match(err.message, /no akbe index at .*akbe index build/);
});
