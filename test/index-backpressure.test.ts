/**
 * /retrieve under backpressure (issue 16: the write() paths no test reached): a client that stops
 * reading holds the server at the chunk the socket could not take (the backend is not asked for
 * more), a client that reads slowly still gets every chunk in order, and a client that hangs up
 * mid-reply stops the search for good while the server keeps serving. Counts only, no timings:
 * "stalled" means the backend's call count stayed the same for a while.
 */
import { request } from 'node:http';
import t from 'tap';
import { startRetrievalHttpServer } from '../src/retrieval/http.js';

const QUERIES = 60;
/** Half a megabyte per hit: 60 chunks are 30 MB, more than any loopback socket buffers. */
const BIG = 'x'.repeat(512 * 1024);

function bigBackend() {
  const seen: string[] = [];
  return {
    seen,
    search: async (queries: string[], _k: number) => {
      seen.push(...queries);
      return queries.map((q) => [{ id: q, title: q, contents: BIG, score: 1 }]);
    },
  };
}

/** Resolves with the count once it has not changed for `quietMs` (or after `maxMs`). */
async function settled(count: () => number, quietMs = 400, maxMs = 15_000): Promise<number> {
  const start = Date.now();
  let last = count();
  let since = Date.now();
  while (Date.now() - start < maxMs) {
    await new Promise((r) => setTimeout(r, 50));
    const now = count();
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) break;
  }
  return last;
}

const body = JSON.stringify({ queries: Array.from({ length: QUERIES }, (_, i) => `q${i}`), topk: 1 });

t.test('a client that stops reading stalls the search; hanging up ends it; the server goes on', async (t) => {
  const backend = bigBackend();
  await using srv = await startRetrievalHttpServer(backend, { chunkQueries: 1 });
  const req = request(`${srv.url}/retrieve`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
  });
  const response = new Promise<import('node:http').IncomingMessage>((resolve) => req.on('response', resolve));
  req.on('error', () => {});
  req.end(body);
  const res = await response;
  res.pause(); // read nothing more: the socket fills, write() returns false
  t.equal(res.statusCode, 200);
  const stalled = await settled(() => backend.seen.length);
  t.ok(stalled >= 1 && stalled < QUERIES, `stalled at ${stalled} of ${QUERIES} chunks`);
  res.on('error', () => {});
  req.destroy(); // hang up mid-reply
  const after = await settled(() => backend.seen.length);
  t.ok(after < QUERIES, `after the hang-up the search stopped at ${after} of ${QUERIES}`);
  t.ok(after - stalled <= 1, 'at most the chunk in flight');
  // The server still answers.
  const small = await fetch(`${srv.url}/retrieve`, {
    method: 'POST',
    body: JSON.stringify({ queries: ['a'], topk: 1 }),
  });
  t.equal(small.status, 200);
  t.equal(((await small.json()) as { result: unknown[][] }).result.length, 1);
});

t.test('a slow reader gets every chunk, in order, once the socket drains', async (t) => {
  const backend = bigBackend();
  await using srv = await startRetrievalHttpServer(backend, { chunkQueries: 1 });
  const req = request(`${srv.url}/retrieve`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
  });
  const res = await new Promise<import('node:http').IncomingMessage>((resolve) => {
    req.on('response', resolve);
    req.end(body);
  });
  res.pause();
  const stalled = await settled(() => backend.seen.length);
  t.ok(stalled < QUERIES, `paused at ${stalled} chunks`);
  let bytes = 0;
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => {
    bytes += c.length;
    chunks.push(c);
  });
  await new Promise((r) => {
    res.on('end', r);
    res.resume();
  });
  t.ok(bytes > QUERIES * BIG.length, `${bytes} bytes`);
  const reply = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
    result: Array<Array<{ id: string; contents: string }>>;
  };
  t.strictSame(
    reply.result.map((docs) => docs[0].id),
    Array.from({ length: QUERIES }, (_, i) => `q${i}`),
  );
  t.strictSame(
    backend.seen,
    Array.from({ length: QUERIES }, (_, i) => `q${i}`),
    'each chunk searched once',
  );
});
