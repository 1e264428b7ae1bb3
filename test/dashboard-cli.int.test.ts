/**
 * `akbe dashboard` as a process against a real nats-server with accounts (it connects as the
 * read-only viewer): it prints its URL, answers its API, refuses foreign Host and Origin headers
 * and anything but GET, reports bad flags as usage errors, and stops on SIGTERM.
 */
import { request } from 'node:http';
import t from 'tap';
import { Rng } from '../src/util/rng.js';
import { runCli } from './helpers/cli.js';
import { startCli, until } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';

function get(
  port: number,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('bad flags are usage errors naming the flag', async (t) => {
  const port = await runCli('dashboard', '--port', '70000');
  t.equal(port.code, 2);
  t.match(port.err, /--port/);
  const inspect = await runCli('dashboard', '--inspect', 'http://x', '--port', '0');
  t.equal(inspect.code, 2);
  t.match(inspect.err, /--inspect must be a ws:\/\/ URL/);
});

t.test('akbe dashboard serves its API read-only to its own origin only', async (t) => {
  const nats = await withNats(t);
  const cli = startCli([
    'dashboard',
    '--port',
    '0',
    '--nats',
    nats.server.url,
    '--inspect',
    'ws://127.0.0.1:9',
  ]);
  t.teardown(() => cli.child.kill('SIGKILL'));
  await until('the dashboard URL', () => /open http:\/\/127\.0\.0\.1:\d+\//.test(cli.output()), 60_000);
  const port = Number(/open http:\/\/127\.0\.0\.1:(\d+)\//.exec(cli.output())![1]);
  const own = { Host: `127.0.0.1:${port}` };

  const runs = await get(port, '/api/runs', own);
  t.equal(runs.status, 200);
  t.same(JSON.parse(runs.body), { runs: [], undecodable: 0 }, 'an empty store lists no runs');
  t.match(runs.headers['content-security-policy'], /default-src 'self'/);
  t.equal((await get(port, '/api/runs/nope', own)).body, 'null', 'a run not started yet');
  const missing = await get(port, '/api/runs/nope/questions', own);
  t.equal(missing.status, 404);
  t.match(JSON.parse(missing.body).error, /run nope/);
  t.equal((await get(port, '/api/nothing', own)).status, 404);
  t.equal(
    (await get(port, '/assets/../../package.json', own)).status,
    404,
    'only the bundle files are served',
  );
  t.match(JSON.parse((await get(port, '/api/experiments', own)).body), { experiments: [] });
  t.match(JSON.parse((await get(port, '/api/actors', own)).body), {
    relays: [{ url: 'ws://127.0.0.1:9', connected: false }],
    actors: [],
  });

  t.equal((await get(port, '/api/runs', { Host: `evil.example:${port}` })).status, 403, 'DNS rebinding');
  t.equal(
    (await get(port, '/api/runs', { ...own, Origin: 'http://evil.example' })).status,
    403,
    'cross-site',
  );
  t.equal((await get(port, '/api/runs', own, 'POST')).status, 405);
  t.equal((await get(port, '/api/runs', own, 'DELETE')).status, 405);

  // The attack that killed it (decodeURIComponent outside the try, an unhandled rejection): one
  // malformed escape, by path and by query. It answers 400 and keeps serving.
  t.equal((await get(port, '/%E0%A4%A', own)).status, 400, 'a bad percent-escape is a bad request');
  t.equal((await get(port, '/api/runs/%E0%A4%A/questions', own)).status, 400);
  t.equal((await get(port, '/api/runs', own)).status, 200, 'still serving after it');

  // A seeded fuzz of paths, queries and methods (known seed, so a failure replays): the process
  // never dies and answers every request with a status below 500 (a refusal, not a failure).
  const rng = new Rng(20261202);
  const pieces = [
    'api',
    'runs',
    'questions',
    '..',
    '%',
    '%2e%2e',
    '%E0%A4%A',
    '%00',
    '?',
    '&x=%',
    '#',
    ';',
    'assets',
    '%F0%9F%99%82',
    '%F0%9F',
  ];
  const methods = ['GET', 'HEAD', 'POST', 'PUT', 'OPTIONS', 'PATCH'];
  const statuses = new Set<number>();
  for (let i = 0; i < 200; i++) {
    const n = 1 + rng.int(5);
    const path = `/${Array.from({ length: n }, () => pieces[rng.int(pieces.length)]).join('/')}`;
    const method = methods[rng.int(methods.length)];
    const r = await get(port, path, own, method); // sent raw
    statuses.add(r.status);
    // 503 only for the page itself before `npm run build` (a fresh clone has no bundle).
    const unbuilt = r.status === 503 && (method === 'HEAD' || /dashboard bundle missing/.test(r.body));
    if (!(r.status >= 200 && r.status < 500) && !unbuilt) t.fail(`fuzz ${i}: ${path} answered ${r.status}`);
  }
  t.ok(statuses.size >= 3, `fuzz saw statuses ${[...statuses].sort().join(', ')}`);
  t.equal((await get(port, '/api/runs', own)).status, 200, 'still serving after the fuzz');

  cli.child.kill('SIGTERM');
  t.equal(await cli.exited, 0, 'SIGTERM stops it cleanly');
});
