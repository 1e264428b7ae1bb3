import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { connectLocal } from '../src/actors/nats/connection.js';
import { type LocalNatsServer, startNatsServer } from '../src/actors/nats/nats-server.js';
import { requestSearch, SearchService, searchSubject } from '../src/actors/services/search/search-service.js';
import { SearchServiceError } from '../src/retrieval/search-request.js';
import { IndexSearcher, type SearchBackend } from '../src/retrieval/searcher.js';
import { buildIndex } from '../src/retrieval/store.js';
import { tmpDir, writeWikiCorpus } from './fixtures/index/tmp-corpus.js';
import { WIKI_PASSAGES } from './fixtures/index/wiki-passages.js';

let server: LocalNatsServer;
let nc: NatsConnection;
let searcher: IndexSearcher;
let service: SearchService;
const titles = WIKI_PASSAGES.map((p) => p.contents.split('\n')[0]);

t.before(async () => {
  const dir = tmpDir();
  const out = join(dir, 'idx');
  await buildIndex({ corpus: writeWikiCorpus(dir), out, embedder: { kind: 'lexical' }, progress: false });
  searcher = await IndexSearcher.open(out);
  server = await startNatsServer({ storeDir: mkdtempSync(join(tmpdir(), 'akbe-nats-')) });
  nc = await connectLocal(server);
  service = SearchService.start(nc, searcher, { runId: 'r1' });
});

t.teardown(async () => {
  await service.stop();
  await nc.close();
  await searcher.close();
  await server.stop();
});

t.test(
  'answers 200 concurrent requests, each with its own results, in fewer batches than requests',
  async (t) => {
    const batchesBefore = service.stats.batches;
    const asks = Array.from({ length: 200 }, (_, i) => {
      const p = WIKI_PASSAGES[i % WIKI_PASSAGES.length];
      // Alternate single and double queries and vary topk, so a mix-up would show.
      const queries =
        i % 2 ? [titles[i % titles.length]] : [titles[i % titles.length], titles[(i + 1) % titles.length]];
      return {
        queries,
        topk: 1 + (i % 3),
        expect: [p.id, ...(i % 2 ? [] : [WIKI_PASSAGES[(i + 1) % WIKI_PASSAGES.length].id])],
      };
    });
    const replies = await Promise.all(asks.map((a) => requestSearch(nc, 'r1', a.queries, a.topk, 20_000)));
    t.equal(replies.length, 200);
    const wrong = replies.flatMap((r, i) => {
      const a = asks[i];
      const ok =
        r.length === a.queries.length &&
        r.every((hits, q) => hits.length === a.topk && hits[0].id === a.expect[q]);
      return ok ? [] : [i];
    });
    t.same(wrong, [], 'no reply lost or mismatched');
    const batches = service.stats.batches - batchesBefore;
    t.ok(batches < 200, `requests were batched (${batches} backend calls for 200 requests)`);
  },
);

t.test('a malformed request gets an error reply and the service keeps answering', async (t) => {
  const subject = searchSubject('r1');
  t.equal(subject, 'akbe.r1.svc.search');
  const bad = async (payload: string) =>
    JSON.parse((await nc.request(subject, payload, { timeout: 5000 })).string());
  t.match(await bad('not json'), { error: /not valid JSON/ });
  t.match(await bad('{"queries": "paris"}'), { error: /"queries" must be an array/ });
  t.match(await bad('{"queries": ["a", 3]}'), { error: /"queries\[1\]" must be a string/ });
  t.match(await bad('{"queries": ["a"], "topk": 0}'), { error: /"topk" must be an integer/ });
  await t.rejects(requestSearch(nc, 'r1', ['x'], 1000), SearchServiceError);
  const [hits] = await requestSearch(nc, 'r1', ['Isle of Wight']);
  t.equal(hits.length, 3, 'default topk is 3');
  t.equal(hits[0].id, 'w30');
  t.match(hits[0], { title: 'Isle of Wight', contents: /English Channel/, score: Number });
});

t.test('a failing backend turns into error replies, not a crash', async (t) => {
  const failing: SearchBackend = { search: async () => Promise.reject(new Error('disk on fire')) };
  const svc = SearchService.start(nc, failing, { runId: 'r2' });
  await t.rejects(requestSearch(nc, 'r2', ['x']), /search failed: disk on fire/);
  await svc.stop();
});

t.test('searchLatencyMs holds every reply back by that long, results unchanged', async (t) => {
  const slow = SearchService.start(nc, searcher, { runId: 'r3', searchLatencyMs: 300 });
  const t0 = performance.now();
  const [a, b] = await Promise.all([
    requestSearch(nc, 'r3', ['Isle of Wight'], 1),
    requestSearch(nc, 'r3', ['English Channel'], 1),
  ]);
  const waited = performance.now() - t0;
  t.same(a, await requestSearch(nc, 'r1', ['Isle of Wight'], 1), 'the same results as without the delay');
  t.ok(b[0].length === 1);
  // A lower bound only (the knob's contract), never a speed claim.
  t.ok(waited >= 295, `both replies waited the 300 ms (${waited.toFixed(0)} ms)`);
  t.equal(slow.stats.requests, 2);
  await slow.stop();
});
