import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { CorpusFormatError, loadCorpus, splitTitle } from '../src/index/corpus.js';
import { buildIndex, IndexBuildError } from '../src/index/store.js';
import { tmpDir, writeCorpusLines } from './fixtures/index/tmp-corpus.js';

const good = (i: number) => JSON.stringify({ id: `d${i}`, contents: `Title ${i}\nBody of passage ${i}.` });

t.test(
  'reads id and contents line by line, skipping blank lines and keeping numeric ids as strings',
  async (t) => {
    const dir = tmpDir();
    const file = writeCorpusLines(dir, [
      good(1),
      '',
      JSON.stringify({ id: 7, contents: 'Seven\nText', extra: true }),
    ]);
    const passages = await loadCorpus(file);
    t.same(passages, [
      { id: 'd1', contents: 'Title 1\nBody of passage 1.' },
      { id: '7', contents: 'Seven\nText' },
    ]);
    t.same(splitTitle('Paris\nParis is the capital\nof France.'), {
      title: 'Paris',
      text: 'Paris is the capital\nof France.',
    });
    t.same(splitTitle('Only a title'), { title: 'Only a title', text: '' });
  },
);

const broken: Array<[string, string, RegExp]> = [
  ['invalid JSON', '{"id": "x", "contents": "Title\\nText"', /corpus\.jsonl:3: invalid JSON/],
  ['a missing "contents" field', '{"id": "x"}', /corpus\.jsonl:3: missing field "contents"/],
  ['a missing "id" field', '{"contents": "T\\nx"}', /corpus\.jsonl:3: missing field "id"/],
  [
    'a non-string "contents"',
    '{"id": "x", "contents": 5}',
    /corpus\.jsonl:3: field "contents" must be a string/,
  ],
  ['an array instead of an object', '[1, 2]', /corpus\.jsonl:3: not a JSON object/],
];

for (const [what, line, message] of broken) {
  t.test(`${what} on line 3 fails the build with the line number and leaves no partial index`, async (t) => {
    const dir = tmpDir();
    const file = writeCorpusLines(dir, [good(1), good(2), line, good(4)]);
    const out = join(dir, 'idx');
    const err = await buildIndex({ corpus: file, out, embedder: { kind: 'lexical' }, progress: false }).catch(
      (e) => e,
    );
    t.ok(err instanceof CorpusFormatError, `got ${err}`);
    t.match(err.message, message);
    t.equal(err.line, 3);
    t.equal(existsSync(out), false, 'no index directory');
    t.same(readdirSync(dir).sort(), ['corpus.jsonl'], 'no temporary build directory left behind');
  });
}

t.test('a failed rebuild leaves the earlier index untouched', async (t) => {
  const dir = tmpDir();
  const out = join(dir, 'idx');
  const ok = writeCorpusLines(dir, [good(1), good(2)], 'ok.jsonl');
  const meta = await buildIndex({ corpus: ok, out, embedder: { kind: 'lexical' }, progress: false });
  t.equal(meta.count, 2);
  const bad = writeCorpusLines(dir, [good(1), '{"id": "x"}'], 'bad.jsonl');
  await t.rejects(
    buildIndex({ corpus: bad, out, embedder: { kind: 'lexical' }, progress: false }),
    /bad\.jsonl:2: missing field "contents"/,
  );
  t.same(readdirSync(out).sort(), [
    'hnsw.bin',
    'lexical-df.u32',
    'meta.json',
    'offsets.f64',
    'passages.jsonl',
  ]);
  t.same(readdirSync(dir).sort(), ['bad.jsonl', 'idx', 'ok.jsonl']);
});

t.test('refuses to build over a directory that is not an index', async (t) => {
  const dir = tmpDir();
  const file = writeCorpusLines(dir, [good(1)]);
  const err = await buildIndex({
    corpus: file,
    out: dir,
    embedder: { kind: 'lexical' },
    progress: false,
  }).catch((e) => e);
  t.ok(err instanceof IndexBuildError);
  t.match(err.message, /non-empty directory that holds no akbe index/);
});

t.test('a missing corpus file is an error naming the file', async (t) => {
  const dir = tmpDir();
  await t.rejects(
    buildIndex({
      corpus: join(dir, 'nope.jsonl'),
      out: join(dir, 'idx'),
      embedder: { kind: 'lexical' },
      progress: false,
    }),
    /nope\.jsonl/,
  );
  t.same(readdirSync(dir), []);
});

t.test('an aborted build (Ctrl-C) removes its temporary directory', async (t) => {
  const dir = tmpDir();
  const file = writeCorpusLines(dir, [good(1), good(2), good(3)]);
  const abort = new AbortController();
  abort.abort(new Error('interrupted'));
  await t.rejects(
    buildIndex({
      corpus: file,
      out: join(dir, 'idx'),
      embedder: { kind: 'lexical' },
      progress: false,
      signal: abort.signal,
    }),
    /interrupted/,
  );
  t.same(readdirSync(dir), ['corpus.jsonl']);
});
