/**
 * The search tool on the world's real hnswlib index: the index `akbe world build` makes ranks
 * every question of the world exactly as the brute-force lexical scan does, and the tool, called
 * over a real NATS search service, returns those passages, formats and records them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { connectLocal } from '../src/actors/nats/connection.js';
import { type LocalNatsServer, startNatsServer } from '../src/actors/nats/nats-server.js';
import { startSearchRole } from '../src/actors/roles/roles.js';
import { natsServiceCall } from '../src/actors/rollout/tool-calls.js';
import { loadCorpus } from '../src/retrieval/corpus.js';
import { formatObservation } from '../src/retrieval/observation.js';
import { IndexSearcher } from '../src/retrieval/searcher.js';
import { validateTrainConfig } from '../src/rl/config.js';
import { DEFAULT_TOOLS, toolsNamed } from '../src/tools/registry.js';
import { searchTool } from '../src/tools/search.js';
import { TINY_WORLD } from '../src/world/config.js';
import { writeWorld } from '../src/world/files.js';
import { generateWorld } from '../src/world/generate.js';
import { LexicalRetriever } from '../src/world/retrieval.js';
import { buildWorldIndex, IndexFingerprintError, worldIndexDir } from '../src/world/search-index.js';
import { TINY_TRAIN } from './helpers/tiny-run.js';

const tmp = mkdtempSync(join(tmpdir(), 'akbe-tools-'));
const worldDir = join(tmp, 'world');
const world = generateWorld({ ...TINY_WORLD, seed: 3 });
await writeWorld(world, worldDir);
const meta = await buildWorldIndex(worldDir);
const corpus = await loadCorpus(join(worldDir, 'corpus.jsonl'));
const bruteForce = new LexicalRetriever(corpus, corpus);
let server: LocalNatsServer;
let nc: NatsConnection;

t.before(async () => {
  server = await startNatsServer({ storeDir: join(tmp, 'nats') });
  nc = await connectLocal(server);
});
t.teardown(async () => {
  await nc?.close();
  await server?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

t.test("the world's hnswlib index ranks every world question as the brute-force scan does", async (t) => {
  await using searcher = await IndexSearcher.open(worldIndexDir(worldDir));
  t.equal(meta.count, corpus.length, 'one index row per passage');
  const queries = world.questions.map((q) => q.question);
  t.ok(queries.length > 50, `${queries.length} questions`);
  const found = await searcher.search(queries, 3);
  let same = 0;
  for (const [i, q] of queries.entries()) {
    const want = bruteForce.search(q, 3).map((p) => p.id);
    if (found[i].map((h) => h.id).join() === want.join()) same++;
    else t.fail(`${JSON.stringify(q)}: hnsw ${found[i].map((h) => h.id)} vs brute force ${want}`);
  }
  t.equal(same, queries.length, 'every top-3 equal, in order');
});

t.test('the search tool over a real search service: parse, call, observe, record', async (t) => {
  const spec = {
    train: validateTrainConfig(TINY_TRAIN),
    worldDir,
    basePolicy: '-',
    topK: 3,
    indexFingerprint: meta.fingerprint,
  };
  const service = await startSearchRole(nc, 'tools1', spec);
  t.teardown(() => service.stop());
  const [tool] = toolsNamed(DEFAULT_TOOLS, { topK: 3 });
  t.equal(tool.tag, 'search');
  t.equal(tool.parse('   '), null, 'an empty query is not a call');
  const q = world.questions[0].question;
  const args = tool.parse(` ${q} `);
  t.same(args, { query: q });
  const hits = await tool.call(args, natsServiceCall(nc, 'tools1'));
  const want = bruteForce.search(q, 3);
  t.same(
    hits.map((h: { id: string }) => h.id),
    want.map((p) => p.id),
  );
  t.equal(tool.observe(hits), formatObservation(want), "Search-R1's Doc i(Title: t) list");
  t.ok(tool.observe(hits, { maxChars: 90 }).length <= 90, 'cut to the character budget');
  t.same(
    tool.record(hits).passageIds,
    want.map((p) => p.id),
  );
});

t.test('the search role refuses an index whose fingerprint is not the run recorded', async (t) => {
  const spec = {
    train: validateTrainConfig(TINY_TRAIN),
    worldDir,
    basePolicy: '-',
    topK: 3,
    indexFingerprint: 'lexical(other)',
  };
  await t.rejects(startSearchRole(nc, 'tools2', spec), IndexFingerprintError);
});

t.test('a service error or a malformed reply is a ToolReplyError naming the tool', async (t) => {
  const tool = searchTool();
  await t.rejects(
    tool.call({ query: 'x' }, async () => ({ error: 'index closed' })),
    { name: 'ToolReplyError', message: /tool search: service error: index closed/ },
  );
  await t.rejects(
    tool.call({ query: 'x' }, async () => ({ results: [[{ id: 1 }]] })),
    {
      name: 'ToolReplyError',
      message: /results\[0\]\[0\] needs id/,
    },
  );
  t.throws(() => toolsNamed(['calculator']), {
    name: 'UnknownToolError',
    message: /registered tools: search/,
  });
  t.throws(() => toolsNamed(['search', 'search']), { name: 'DuplicateToolError' });
});
