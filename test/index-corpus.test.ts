import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { CorpusFormatError, loadCorpus, splitTitle } from '../src/retrieval/corpus.js';
import { buildIndex, IndexBuildError } from '../src/retrieval/store.js';
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

/** A corpus file from raw bytes (a real bad file, not a string JS would have re-encoded). */
function writeCorpusBytes(dir: string, parts: Array<string | number[]>): string {
  const file = join(dir, 'corpus.jsonl');
  writeFileSync(
    file,
    Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p)))),
  );
  return file;
}

const refused: Array<[string, (dir: string) => string, RegExp, number]> = [
  [
    'invalid UTF-8 (a Latin-1 é)',
    (dir) =>
      writeCorpusBytes(dir, [`${good(1)}\n${good(2)}\n{"id": "x", "contents": "Caf`, [0xe9], `\\nText"}\n`]),
    // {"id": "x", "contents": "Caf is 28 bytes: the bad byte is the 29th.
    /corpus\.jsonl:3: invalid UTF-8 \(byte 0xe9 at byte 29 of the line\)/,
    3,
  ],
  [
    'invalid UTF-8 (a 3-byte sequence cut short, CRLF lines)',
    (dir) => writeCorpusBytes(dir, [`${good(1)}\r\n{"id": "y", "contents": "`, [0xe2, 0x82], `"}\r\n`]),
    /corpus\.jsonl:2: invalid UTF-8 \(byte 0xe2 at byte 26 of the line\)/,
    2,
  ],
  [
    'a duplicate passage id',
    (dir) =>
      writeCorpusLines(dir, [good(1), good(2), '', JSON.stringify({ id: 'd1', contents: 'Again\nx' })]),
    /corpus\.jsonl:4: duplicate passage id "d1" \(first on line 1\)/,
    4,
  ],
  [
    'a numeric id equal to a string id',
    (dir) =>
      writeCorpusLines(dir, [
        JSON.stringify({ id: '7', contents: 'a\nb' }),
        JSON.stringify({ id: 7, contents: 'c\nd' }),
      ]),
    /corpus\.jsonl:2: duplicate passage id "7" \(first on line 1\)/,
    2,
  ],
  [
    'an empty file',
    (dir) => writeCorpusBytes(dir, []),
    /corpus\.jsonl:1: no passages \(the file is empty\)/,
    1,
  ],
  [
    'only blank lines',
    (dir) => writeCorpusBytes(dir, ['\n  \n\n']),
    /corpus\.jsonl:3: no passages \(3 blank lines\)/,
    3,
  ],
];

for (const [what, write, message, line] of refused) {
  t.test(`${what}: the build is refused naming file:line, and leaves nothing behind`, async (t) => {
    const dir = tmpDir();
    const file = write(dir);
    const out = join(dir, 'idx');
    const err = await buildIndex({ corpus: file, out, embedder: { kind: 'lexical' }, progress: false }).catch(
      (e) => e,
    );
    t.ok(err instanceof CorpusFormatError, `got ${err}`);
    t.match(err.message, message);
    t.equal(err.line, line);
    t.equal(existsSync(out), false, 'no index directory');
    t.same(readdirSync(dir), ['corpus.jsonl'], 'no temporary build directory left behind');
    // The readers of a world's corpus (dev evaluation) refuse it too.
    await t.rejects(loadCorpus(file), message);
  });
}

t.test('valid multi-byte UTF-8 and CRLF line ends read as the text they encode', async (t) => {
  const dir = tmpDir();
  const file = writeCorpusBytes(dir, [
    '{"id": "a", "contents": "Caf',
    [0xc3, 0xa9],
    ' \\u00e9\\nx"}\r\n{"id": "b", "contents": "',
    [0xf0, 0x9f, 0x98, 0x80, 0xe2, 0x82, 0xac],
    '"}',
  ]);
  t.same(await loadCorpus(file), [
    { id: 'a', contents: 'Café é\nx' },
    { id: 'b', contents: '😀€' },
  ]);
});

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
