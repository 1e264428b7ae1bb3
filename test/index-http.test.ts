import { join } from 'node:path';
import t from 'tap';
import { type RetrievalHttpServer, startRetrievalHttpServer } from '../src/retrieval/http.js';
import { IndexSearcher } from '../src/retrieval/searcher.js';
import { buildIndex } from '../src/retrieval/store.js';
import { tmpDir, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';
import { WIKI_PASSAGES } from './fixtures/index/wiki-passages.js';

let searcher: IndexSearcher;
let http: RetrievalHttpServer;

t.before(async () => {
  const dir = tmpDir();
  const out = join(dir, 'idx');
  await buildIndex({ corpus: writeWikiCorpus(dir), out, embedder: { kind: 'lexical' }, progress: false });
  searcher = await IndexSearcher.open(out);
  http = await startRetrievalHttpServer(searcher);
});

t.teardown(async () => {
  await http.close();
  await searcher.close();
});

const post = async (body: unknown, path = '/retrieve') => {
  const res = await fetch(http.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: the tests walk arbitrary JSON replies
  const json = (await res.json()) as any;
  return { status: res.status, type: res.headers.get('content-type'), json };
};

t.test('POST /retrieve with return_scores answers in the Search-R1 shape', async (t) => {
  const { status, type, json } = await post({
    queries: ['Depeche Mode', 'Apollo 17'],
    topk: 3,
    return_scores: true,
  });
  t.equal(status, 200);
  t.equal(type, 'application/json');
  t.same(Object.keys(json), ['result']);
  t.equal(json.result.length, 2);
  for (const list of json.result) {
    t.equal(list.length, 3);
    for (const item of list) {
      t.same(Object.keys(item).sort(), ['document', 'score']);
      t.same(Object.keys(item.document).sort(), ['contents', 'id']);
      t.type(item.score, 'number');
    }
  }
  t.equal(json.result[0][0].document.id, 'w1');
  t.match(json.result[0][0].document.contents, /^Depeche Mode\n/);
  t.equal(json.result[1][0].document.id, 'w3');
  // The score is the index's inner product, best first: the same hits and scores as a direct search.
  const direct = await searcher.search(['Depeche Mode', 'Apollo 17'], 3);
  t.same(
    json.result.map((l: Array<{ document: { id: string }; score: number }>) =>
      l.map((x) => [x.document.id, Math.fround(x.score)]),
    ),
    direct.map((l) => l.map((h) => [h.id, Math.fround(h.score)])),
  );
  for (const list of json.result) {
    const scores = list.map((x: { score: number }) => x.score);
    t.ok(scores[0] > scores[2], `best first: ${scores}`);
    t.ok(scores[0] > 0.2 && scores[0] <= 1 + 1e-6, `a cosine of a matching title: ${scores[0]}`);
  }
});

t.test('without return_scores each query gets the plain document list; topk defaults to 3', async (t) => {
  const { status, json } = await post({ queries: ['Isle of Wight'] });
  t.equal(status, 200);
  t.equal(json.result[0].length, 3);
  t.equal(
    (await post({ queries: ['Isle of Wight'], topk: 0 })).json.result[0].length,
    3,
    'topk 0 means the default, as in Search-R1',
  );
  t.same(Object.keys(json.result[0][0]).sort(), ['contents', 'id']);
  t.equal(json.result[0][0].id, 'w30');
});

t.test("bad bodies get FastAPI's 422 shape, every field's error at once; other routes 404/405", async (t) => {
  const bad = await post({ queries: ['ok', 7], topk: 'three', return_scores: 'maybe' });
  t.equal(bad.status, 422);
  t.same(bad.json, {
    detail: [
      { type: 'string_type', loc: ['body', 'queries', 1], msg: 'Input should be a valid string', input: 7 },
      {
        type: 'int_parsing',
        loc: ['body', 'topk'],
        msg: 'Input should be a valid integer, unable to parse string as an integer',
        input: 'three',
      },
      {
        type: 'bool_parsing',
        loc: ['body', 'return_scores'],
        msg: 'Input should be a valid boolean, unable to interpret input',
        input: 'maybe',
      },
    ],
  });
  t.match(await post({ query: 'x' }), {
    status: 422,
    json: { detail: [{ type: 'missing', loc: ['body', 'queries'], msg: 'Field required' }] },
  });
  t.match(await post({ queries: 'x' }), { status: 422, json: { detail: [{ type: 'list_type' }] } });
  t.match(await post({ queries: ['x'], topk: 2.5 }), {
    status: 422,
    json: { detail: [{ type: 'int_from_float' }] },
  });
  t.match(await post({ queries: ['x'], return_scores: null }), {
    status: 422,
    json: { detail: [{ type: 'bool_type', loc: ['body', 'return_scores'] }] },
  });
  t.match(await post([1, 2]), {
    status: 422,
    json: { detail: [{ type: 'model_attributes_type', loc: ['body'] }] },
  });
  t.match(await post('{nope'), {
    status: 422,
    json: { detail: [{ type: 'json_invalid', loc: ['body', 1], msg: 'JSON decode error' }] },
  });
  t.match(await post({ queries: ['x'] }, '/search'), { status: 404, json: { detail: 'Not Found' } });
  const get = await fetch(`${http.url}/retrieve`);
  t.equal(get.status, 405);
  t.same(await get.json(), { detail: 'Method Not Allowed' });
});

t.test("loose values pydantic accepts behave as on Search-R1's server; /retrieve/ is served", async (t) => {
  const q = { queries: ['Depeche Mode'] };
  const scored = await post({ ...q, topk: '2', return_scores: 1 });
  t.equal(scored.status, 200);
  t.equal(scored.json.result[0].length, 2, '"topk": "2" is 2');
  t.type(scored.json.result[0][0].score, 'number', '"return_scores": 1 is true');
  const plain = await post({ ...q, topk: 2.0, return_scores: 'off', extra: 'ignored' });
  t.same(Object.keys(plain.json.result[0][0]).sort(), ['contents', 'id'], '"off" is false');
  t.equal((await post({ ...q, topk: true, return_scores: 'YES' })).json.result[0].length, 1, 'true is 1');
  t.equal((await post({ ...q, topk: ' 4 ' })).json.result[0].length, 4, 'spaces around digits');
  t.equal((await post({ ...q, topk: null })).json.result[0].length, 3, 'null is the default');
  const slash = await post({ ...q, topk: 3, return_scores: true }, '/retrieve/');
  t.equal(slash.status, 200);
  t.same(slash.json, (await post({ ...q, topk: 3, return_scores: true })).json);
  t.match(await post({ ...q, topk: -1 }), {
    status: 422,
    json: { detail: [{ type: 'greater_than_equal' }] },
  });
});

t.test("a 2,560-query request (Search-R1's GRPO batch) is answered in chunks, in order", async (t) => {
  const calls: number[] = [];
  const counting = {
    search: (queries: string[], k: number) => {
      calls.push(queries.length);
      return searcher.search(queries, k);
    },
  };
  await using big = await startRetrievalHttpServer(counting, { chunkQueries: 256 });
  const titles = WIKI_PASSAGES.map((p) => p.contents.split('\n')[0]);
  const queries = Array.from({ length: 2560 }, (_, i) => titles[i % titles.length]);
  // The payload and the reading of Search-R1's client (llm_agent/generation.py): topk 3 with
  // scores, then result[i][j].document.contents, whose first line is the title.
  const res = await fetch(`${big.url}/retrieve`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ queries, topk: 3, return_scores: true }),
  });
  t.equal(res.status, 200);
  const { result } = (await res.json()) as { result: Array<Array<{ document: { contents: string } }>> };
  t.equal(result.length, 2560);
  t.ok(
    result.every((docs) => docs.length === 3),
    'three passages per query',
  );
  const firstTitles = result.map((docs) => docs[0].document.contents.split('\n')[0]);
  t.same(firstTitles, queries, "each query's best passage is the one titled by it, in request order");
  t.same(calls, Array(10).fill(256), 'searched 256 queries at a time');
});

t.test('akbe limits: too many queries is a 422 naming the limit, an oversized body a 413', async (t) => {
  await using small = await startRetrievalHttpServer(searcher, {
    limits: { maxQueries: 4, maxQueryChars: 10, maxTopk: 5 },
    maxBodyBytes: 2048,
  });
  const at = async (body: unknown) => {
    const res = await fetch(`${small.url}/retrieve`, { method: 'POST', body: JSON.stringify(body) });
    return { status: res.status, json: await res.json() };
  };
  t.match(await at({ queries: ['a', 'b', 'c', 'd', 'e'] }), {
    status: 422,
    json: { detail: [{ type: 'too_long', loc: ['body', 'queries'], msg: /at most 4 items/ }] },
  });
  t.match(await at({ queries: ['x'.repeat(11)] }), {
    status: 422,
    json: { detail: [{ type: 'string_too_long', loc: ['body', 'queries', 0] }] },
  });
  t.match(await at({ queries: ['a'], topk: 6 }), {
    status: 422,
    json: { detail: [{ type: 'less_than_equal' }] },
  });
  t.match(await at({ queries: ['y'.repeat(3000)] }), {
    status: 413,
    json: { detail: /larger than 2048 bytes/ },
  });
});

t.test('empty and malformed bodies, query strings, default host, IPv6 and a taken port', async (t) => {
  for (const body of ['', '  \n'])
    t.same(await post(body), {
      status: 422,
      type: 'application/json',
      json: { detail: [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }] },
    });
  // A two-digit position: the whole number is the location; the parser's message is the ctx.
  const bad = '{"queries": ["a"], x}';
  let parseError = '';
  try {
    JSON.parse(bad);
  } catch (e) {
    parseError = (e as Error).message;
  }
  t.same((await post(bad)).json, {
    detail: [
      {
        type: 'json_invalid',
        loc: ['body', 19],
        msg: 'JSON decode error',
        input: {},
        ctx: { error: parseError },
      },
    ],
  });
  const q = await post({ queries: ['Apollo 17'], topk: 1 }, '/retrieve?trace=1');
  t.equal(q.status, 200, 'a query string does not change the route');
  t.equal(q.json.result[0][0].id, 'w3');
  const nf = await fetch(`${http.url}/nope`, { method: 'POST', body: '{}' });
  t.equal(nf.headers.get('content-type'), 'application/json');
  t.equal(nf.headers.get('content-length'), String(Buffer.byteLength('{"detail":"Not Found"}')));

  t.match(http.url, /^http:\/\/127\.0\.0\.1:\d+$/, 'loopback by default');
  await using v6 = await startRetrievalHttpServer(searcher, { host: '::1' });
  t.match(v6.url, /^http:\/\/\[::1\]:\d+$/);
  await t.rejects(startRetrievalHttpServer(searcher, { port: http.port }), { code: 'EADDRINUSE' });
});

t.test('a failing backend: 500 before the reply starts, a cut connection after', async (t) => {
  let calls = 0;
  const failing = {
    search: async (queries: string[], k: number) => {
      if (calls++ === 1) throw new Error('index gone');
      return searcher.search(queries, k);
    },
  };
  await using srv = await startRetrievalHttpServer(failing, { chunkQueries: 1 });
  const req = (queries: string[]) =>
    fetch(`${srv.url}/retrieve`, { method: 'POST', body: JSON.stringify({ queries, topk: 1 }) });
  const first = await req(['Apollo 17']); // call 0 succeeds
  t.equal(first.status, 200);
  const second = await req(['Apollo 17']); // call 1 fails before any byte is sent
  t.equal(second.status, 500);
  t.same(await second.json(), { detail: 'internal error: index gone' });
  calls = 0;
  // Call 0 answers chunk 1 and the status; call 1 fails mid-reply: the body is cut, never short.
  // (The status line may or may not reach the client before the connection is destroyed.)
  await t.rejects(
    (async () => (await req(['Apollo 17', 'Depeche Mode'])).text())(),
    'the reply is cut, not a complete JSON body',
  );
  t.equal(calls, 2);
});

t.test(
  'DNS rebinding and cross-site posts: /retrieve checks Host and Origin (issue 23 item 6)',
  async (t) => {
    const { request } = await import('node:http');
    const send = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ queries: ['Apollo 17'], topk: 1 });
        const req = request(
          { host: '127.0.0.1', port: http.port, path: '/retrieve', method: 'POST', headers },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const json = { 'content-type': 'application/json' };
    t.equal(await send({ ...json, host: `127.0.0.1:${http.port}` }), 200, 'its own address');
    // A rebinding page reaches the port under its own name and sends that name as Host.
    t.equal(await send({ ...json, host: `attacker.example:${http.port}` }), 403, 'a foreign Host');
    // Another site's page: a simple text/plain POST needs no preflight, only the Origin check stops it.
    t.equal(
      await send({
        'content-type': 'text/plain',
        host: `127.0.0.1:${http.port}`,
        origin: 'https://attacker.example',
      }),
      403,
      'a cross-site Origin',
    );
  },
);
