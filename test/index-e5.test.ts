import { join } from 'node:path';
import t from 'tap';
import { type BertWeights, writeBertModel } from '../src/retrieval/bert-model.js';
import { E5Embedder } from '../src/retrieval/e5.js';
import { bruteForceTopK, stackRows } from '../src/retrieval/hnsw.js';
import { lexicalTokens } from '../src/retrieval/lexical.js';
import { EmbedderMismatchError, IndexSearcher } from '../src/retrieval/searcher.js';
import { buildIndex } from '../src/retrieval/store.js';
import { WordPieceTokenizer } from '../src/retrieval/wordpiece.js';
import { e5Reference } from './fixtures/index/bert-reference.js';
import { tmpDir, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';
import { WIKI_PASSAGES } from './fixtures/index/wiki-passages.js';

const dir = tmpDir();
let paths: { model: string; vocab: string; weights: BertWeights };
let tokenizer: WordPieceTokenizer;
let e5: E5Embedder;

t.before(async () => {
  const words = new Set(WIKI_PASSAGES.flatMap((p) => lexicalTokens(p.contents)).filter((w) => w.length > 3));
  paths = await writeBertModel(join(dir, 'bert'), { words: [...words].slice(0, 150), seed: 11 });
  tokenizer = await WordPieceTokenizer.fromFile(paths.vocab);
  e5 = await E5Embedder.create({ model: paths.model, vocab: paths.vocab, batchSize: 4 });
});

t.teardown(async () => {
  await e5.close();
});

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i])));

t.test(
  'e5 query and passage embeddings equal the TypeScript reference (1e-5), padded batches included',
  async (t) => {
    t.equal(e5.dim, 32);
    t.match(e5.fingerprint, /^e5\(model=[0-9a-f]{12},vocab=[0-9a-f]{12},maxLen=256,dim=32,pool=mean\)$/);
    // Lengths differ a lot within each batch of 4, so most rows are padded.
    const texts = [
      'Depeche Mode',
      ...WIKI_PASSAGES.slice(0, 6).map((p) => p.contents),
      'who is the lead singer of depeche mode?',
      'Pelé',
    ];
    const queries = await e5.embedQueries(texts);
    const passages = await e5.embedPassages(texts);
    let worst = 0;
    texts.forEach((text, i) => {
      worst = Math.max(
        worst,
        maxDiff(queries[i], e5Reference(paths.weights, tokenizer.encode(`query: ${text}`).ids)),
      );
      worst = Math.max(
        worst,
        maxDiff(passages[i], e5Reference(paths.weights, tokenizer.encode(`passage: ${text}`).ids)),
      );
    });
    t.ok(worst < 1e-5, `max abs difference ${worst}`);
    t.ok(maxDiff(queries[0], passages[0]) > 1e-3, 'the query: / passage: prefixes change the vector');
    t.ok(Math.abs(Math.hypot(...queries[1]) - 1) < 1e-5, 'rows are unit length');
  },
);

t.test('texts longer than 256 tokens are truncated like the reference', async (t) => {
  const long = WIKI_PASSAGES.map((p) => p.contents).join(' ');
  const ids = tokenizer.encode(`passage: ${long}`).ids;
  t.equal(ids.length, 256);
  const [row] = await e5.embedPassages([long]);
  t.ok(maxDiff(row, e5Reference(paths.weights, ids)) < 1e-5);
});

t.test(
  'an e5 index searches like brute force over e5 passage vectors and refuses a lexical query embedder',
  async (t) => {
    const out = join(dir, 'e5-index');
    const meta = await buildIndex({
      corpus: writeWikiCorpus(dir),
      out,
      embedder: { kind: 'e5', model: paths.model, vocab: paths.vocab },
      progress: false,
    });
    t.equal(meta.fingerprint, e5.fingerprint);
    t.same(meta.e5, { model: paths.model, vocab: paths.vocab, maxLength: 256 });
    await using searcher = await IndexSearcher.open(out);
    const queries = ['Apollo 17', 'Battle of Cold Harbor', 'who plays joker in batman the dark knight'];
    const hits = await searcher.search(queries, 3, 200);
    const matrix = stackRows(await e5.embedPassages(WIKI_PASSAGES.map((p) => p.contents)), e5.dim);
    const qv = await e5.embedQueries(queries);
    t.same(
      hits.map((h) => h.map((x) => x.id)),
      qv.map((q) => bruteForceTopK(matrix, e5.dim, q, 3).labels.map((l) => WIKI_PASSAGES[l].id)),
    );

    const lexicalDir = join(dir, 'lex-index');
    await buildIndex({
      corpus: writeWikiCorpus(dir),
      out: lexicalDir,
      embedder: { kind: 'lexical' },
      progress: false,
    });
    const err = await IndexSearcher.open(lexicalDir, { embedder: e5 }).catch((e) => e);
    t.ok(err instanceof EmbedderMismatchError);
    t.match(
      err.message,
      /index at .*lex-index was built with embedder lexical\(dim=1024,.*\) but the query embedder is e5\(model=/,
    );
  },
);

t.test('a model file that is not ONNX fails with the file name', async (t) => {
  await t.rejects(
    E5Embedder.create({ model: paths.vocab, vocab: paths.vocab }),
    /cannot load ONNX model .*vocab\.txt/,
  );
});
