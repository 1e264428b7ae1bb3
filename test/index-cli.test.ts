import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { tmpDir, writeCorpusLines, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';
import { runCli } from './helpers/cli.js';

t.test('akbe index build then search --json finds the entity passage', async (t) => {
  const dir = tmpDir();
  const out = join(dir, 'idx');
  const built = await runCli('index', 'build', '--corpus', writeWikiCorpus(dir), '--out', out);
  t.equal(built.code, 0, built.err);
  t.match(built.out, /built .*idx: 32 passages, lexical\(dim=1024,/);
  t.match(built.err, /embedding \+ indexing .*32\/32/, 'progress goes to stderr');
  const found = await runCli('index', 'search', '--index', out, '--query', 'Voyager 2', '-k', '2', '--json');
  t.equal(found.code, 0, found.err);
  const json = JSON.parse(found.out);
  t.equal(json[0].query, 'Voyager 2');
  t.equal(json[0].results.length, 2);
  t.match(json[0].results[0], { id: 'w21', title: 'Voyager 2', score: Number });
  const text = await runCli('index', 'search', '--index', out, '--query', 'Voyager 2', '--observation');
  t.match(text.out, /Doc 1\(Title: Voyager 2\) Voyager 2 is a space probe/);
});

t.test('a corrupt corpus exits 1 with the file and line, leaving no index', async (t) => {
  const dir = tmpDir();
  const corpus = writeCorpusLines(dir, ['{"id": "a", "contents": "A\\nx"}', '{"id": "b"}']);
  const r = await runCli('index', 'build', '--corpus', corpus, '--out', join(dir, 'idx'));
  t.equal(r.code, 1);
  t.match(r.err, /(^|\n)akbe index build: corpus\.jsonl:2: missing field "contents"/);
  t.notOk(existsSync(join(dir, 'idx')));
});

t.test('bad flags are usage errors naming the flag', async (t) => {
  t.match(await runCli('index', 'build', '--corpus', 'x.jsonl'), {
    code: 2,
    err: /missing required flag --out/,
  });
  t.match(await runCli('index', 'build', '--corpus', 'x', '--out', 'y', '--embedder', 'bm25'), {
    code: 2,
    err: /--embedder must be one of lexical\|e5/,
  });
  t.match(await runCli('index', 'build', '--corpus', 'x', '--out', 'y', '--embedder', 'e5'), {
    code: 2,
    err: /--embedder e5 needs --model FILE and --vocab FILE/,
  });
  t.match(await runCli('index', 'search', '--index', 'x'), { code: 2, err: /missing required flag --query/ });
  t.match(await runCli('index', 'serve', '--index', 'x', '--http-only'), {
    code: 2,
    err: /--http-only needs --http PORT/,
  });
  t.match(await runCli('index', 'serve', '--index', 'x', '--run', 'a.b', '--http', '0'), {
    code: 2,
    err: /--run 'a\.b' must be one NATS subject token/,
  });
});
