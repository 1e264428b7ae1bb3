/**
 * `akbe index serve` as a child process: its flags take effect. `--run` names the NATS subject
 * it answers on, `--http 0` picks a free port for POST /retrieve, the `--max-*` limits refuse
 * what is over them (FastAPI's 422 naming the limit, 413 for the body), `--http-only` serves
 * without NATS (an unreachable --nats is never dialled), and SIGTERM stops it with exit code 0.
 * It connects with the search role's key: given only that seed, it serves.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { seedPath } from '../src/actors/nats/nats-auth.js';
import { requestSearch } from '../src/actors/services/search/search-service.js';
import { buildIndex } from '../src/retrieval/store.js';
import { tmpDir, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';
import { startCli, until } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';

delete process.env.NATS_URL;

const dir = tmpDir();
const index = join(dir, 'idx');
await buildIndex({
  corpus: writeWikiCorpus(dir),
  out: index,
  embedder: { kind: 'lexical' },
  progress: false,
});

async function serve(t: Test, args: string[], env: NodeJS.ProcessEnv = {}) {
  const cli = startCli(['index', 'serve', '--index', index, ...args], env);
  t.teardown(() => {
    if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
  });
  await until(
    'serving',
    () => /serving .* Ctrl-C stops/.test(cli.output()) || cli.child.exitCode !== null,
    60_000,
  );
  const url = /retrieval endpoint: POST (\S+)\/retrieve/.exec(cli.output())?.[1];
  return { cli, url: url ?? '' };
}

async function post(url: string, body: unknown) {
  const res = await fetch(`${url}/retrieve`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: walking arbitrary JSON replies
  return { status: res.status, json: (await res.json()) as any };
}

const ids = (lists: Array<Array<{ id?: string; document?: { id: string } }>>) =>
  lists.map((l) => l.map((h) => h.id ?? h.document?.id));

t.test('--run, --http and the --max-* limits take effect; --http-only never dials NATS', async (t) => {
  const nats = await withNats(t);
  // The search role's seed only (issue 23 item 6): `akbe index serve` connecting as the
  // orchestrator (any other role) finds no credentials here and fails to start.
  const searchOnly = join(dir, 'search-only-auth');
  mkdirSync(searchOnly, { mode: 0o700 });
  copyFileSync(seedPath(nats.authDir, 'search'), seedPath(searchOnly, 'search'));
  // Both children start together (each takes seconds to load the TypeScript sources). The second
  // gets an unreachable --nats (nothing listens on port 1): dialling it would fail the command.
  const [full, only] = await Promise.all([
    serve(
      t,
      [
        '--run',
        'r1',
        '--nats',
        nats.server.url,
        '--http',
        '0',
        '--max-topk',
        '2',
        '--max-queries',
        '2',
        '--max-query-chars',
        '20',
        '--max-body-bytes',
        '1024',
      ],
      { AKBE_NATS_AUTH_DIR: searchOnly },
    ),
    serve(t, ['--http-only', '--http', '0', '--nats', 'nats://127.0.0.1:1']),
  ]);
  const { cli, url } = full;
  t.match(
    cli.output(),
    /search service on \S+ \(flag\) subject akbe\.r1\.svc\.search \(queue group search\)/,
  );
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, 'a free port on the default host');
  t.match(cli.output(), /serving .*idx \(32 passages, /);

  const ok = await post(url, { queries: ['Depeche Mode', 'Apollo 17'], topk: 2 });
  t.equal(ok.status, 200);
  t.same(
    ids(ok.json.result).map((l) => l.length),
    [2, 2],
    '--max-topk 2 allows topk 2',
  );
  t.same(
    ids(ok.json.result).map((l) => l[0]),
    ['w1', 'w3'],
  );
  // The same index answers on akbe.r1.svc.search (the --run subject), with the same hits.
  t.same(ids(await requestSearch(nats.nc, 'r1', ['Depeche Mode', 'Apollo 17'], 2)), ids(ok.json.result));

  const topk = await post(url, { queries: ['Apollo 17'], topk: 3 });
  t.equal(topk.status, 422);
  t.equal(topk.json.detail[0].msg, 'Input should be less than or equal to 2');
  const many = await post(url, { queries: ['a', 'b', 'c'], topk: 1 });
  t.equal(many.status, 422);
  t.match(many.json.detail[0].msg, /^List should have at most 2 items after validation, not 3/);
  const long = await post(url, { queries: ['x'.repeat(21)], topk: 1 });
  t.equal(long.status, 422);
  t.equal(long.json.detail[0].msg, 'String should have at most 20 characters');
  t.equal((await post(url, { queries: ['x'.repeat(20)], topk: 1 })).status, 200, '20 characters pass');
  const big = await post(url, JSON.stringify({ queries: ['a'], topk: 1, pad: 'y'.repeat(1100) }));
  t.equal(big.status, 413, '--max-body-bytes 1024');

  cli.child.kill('SIGTERM');
  t.equal(await cli.exited, 0, 'SIGTERM stops it cleanly');
  await t.rejects(fetch(`${url}/retrieve`, { method: 'POST' }), 'the port is closed');

  t.notMatch(only.cli.output(), /search service on/, '--http-only: no NATS service');
  const one = await post(only.url, { queries: ['Apollo 17'], topk: 4, return_scores: true });
  t.equal(one.status, 200, only.cli.output());
  t.equal(one.json.result[0].length, 4, 'default limits: topk 4 is allowed');
  t.equal(one.json.result[0][0].document.id, 'w3');
  only.cli.child.kill('SIGTERM');
  t.equal(await only.cli.exited, 0);
});
