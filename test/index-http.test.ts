import { join } from 'node:path';
import t from 'tap';
import { type RetrievalHttpServer, startRetrievalHttpServer } from '../src/index/http.js';
import { IndexSearcher } from '../src/index/searcher.js';
import { buildIndex } from '../src/index/store.js';
import { tmpDir, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';

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

t.test('bad bodies get 400 with a JSON error; other routes 404', async (t) => {
  t.match(await post('{nope'), { status: 400, json: { error: /not valid JSON/ } });
  t.match(await post({ query: 'x' }), { status: 400, json: { error: /"queries" must be an array/ } });
  t.match(await post({ queries: ['x'], topk: 'three' }), { status: 400, json: { error: /"topk"/ } });
  t.match(await post({ queries: ['x'], return_scores: 'yes' }), {
    status: 400,
    json: { error: /"return_scores" must be a boolean/ },
  });
  t.match(await post({ queries: ['x'] }, '/search'), { status: 404, json: { error: /POST \/retrieve/ } });
  const get = await fetch(`${http.url}/retrieve`);
  t.equal(get.status, 405);
});
