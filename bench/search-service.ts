/**
 * The training search service against the brute-force lexical scan the search role rebuilt from
 * the corpus before issue 12 (the baseline, kept here verbatim), in the same process, on the same
 * queries, through the same `search(queries, 3)` call the service makes:
 *   - `service`: the index as the search role opens it (src/actors/roles/roles.ts: a lexical index whose
 *     passages fit in memory is searched exactly through its inverted view, src/retrieval/inverted.ts);
 *   - `hnsw`: the same index through its hnswlib graph at the training ef (512).
 *
 *   npm run build && node dist/bench/search-service.js                        # the default world (976 passages)
 *   node dist/bench/search-service.js --passages 100000 --queries 100 --dir /tmp/akbe-100k
 *   flags: --passages N (0 = one default world) --queries 300 --passes 3 --batch 64
 *          --dir DIR (keep the corpus and index there and reuse them: a 100k build takes long)
 *          --ef-construction N (the HNSW graph's build effort, default 200: only the hnsw row uses it)
 *
 * Corpus and queries are real world text: passages of default worlds (seed 0, 1, ... with ids
 * prefixed by the seed until N passages) and their questions. Per backend it prints: latency, the
 * median wall time of one query per call (a rollout's request) over every query of every pass;
 * throughput, queries per second with `--batch` queries per call (the service's batching of
 * concurrent requests), median over passes; and per query, process CPU time (worker threads
 * included) and main-thread busy time, medians over passes of one query per call. The top-3 of
 * every backend are compared with the baseline's on every query.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { splitTitle } from '../src/retrieval/corpus.js';
import { bruteForceTopK, HNSW_DEFAULTS, stackRows } from '../src/retrieval/hnsw.js';
import { LEXICAL_DEFAULTS, LexicalEmbedder } from '../src/retrieval/lexical.js';
import { IndexSearcher, type SearchBackend, type SearchHit } from '../src/retrieval/searcher.js';
import { buildIndex, readMeta } from '../src/retrieval/store.js';
import { DEFAULT_WORLD } from '../src/world/config.js';
import { buildCorpus } from '../src/world/corpus.js';
import { generateEntities, WorldIndex } from '../src/world/entities.js';
import { generateQuestions } from '../src/world/questions.js';
import { TRAINING_SEARCH_EF } from '../src/world/search-index.js';

interface Passage {
  id: string;
  contents: string;
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

function stringArg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** Passages and questions of default worlds, seed 0 first, until `target` passages (0: one world). */
function worldText(target: number): { corpus: Passage[]; queries: string[] } {
  const corpus: Passage[] = [];
  const queries: string[] = [];
  for (let seed = 0; seed === 0 || corpus.length < target; seed++) {
    const config = { ...DEFAULT_WORLD, seed };
    const index = new WorldIndex(generateEntities(config));
    const prefix = seed === 0 ? '' : `w${seed}.`;
    for (const p of buildCorpus(index)) corpus.push({ id: prefix + p.id, contents: p.contents });
    if (seed < 4) queries.push(...generateQuestions(index, config).map((q) => q.question));
  }
  return { corpus: target > 0 ? corpus.slice(0, target) : corpus, queries };
}

/** The search role's backend before issue 12 (src/actors/roles/roles.ts `worldSearchBackend`), verbatim. */
function bruteForceBackend(corpus: Passage[]): SearchBackend {
  const embedder = LexicalEmbedder.fit(
    corpus.map((p) => p.contents),
    LEXICAL_DEFAULTS,
  );
  const matrix = stackRows(
    corpus.map((p) => embedder.embed(p.contents)),
    embedder.dim,
  );
  return {
    async search(queries: string[], k: number): Promise<SearchHit[][]> {
      return queries.map((q) => {
        const top = bruteForceTopK(matrix, embedder.dim, embedder.embed(q), k);
        return top.labels.map((label, i) => {
          const p = corpus[label];
          return {
            id: p.id,
            title: splitTitle(p.contents).title,
            contents: p.contents,
            score: top.scores[i],
          };
        });
      });
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Measured {
  /** Median wall ms of one query per call. */
  latency: number;
  /** Queries per second, `batch` per call. */
  throughput: number;
  /** Per query, one per call: process CPU ms (worker threads included) and main-thread busy ms. */
  cpu: number;
  main: number;
}

async function measure(
  backend: SearchBackend,
  queries: string[],
  batch: number,
  passes: number,
): Promise<Measured> {
  const latencies: number[] = [];
  const perPass: Array<{ cpu: number; main: number; throughput: number }> = [];
  for (let p = 0; p < passes; p++) {
    const c0 = process.cpuUsage();
    const e0 = performance.eventLoopUtilization();
    for (const q of queries) {
      const t0 = performance.now();
      await backend.search([q], 3);
      latencies.push(performance.now() - t0);
    }
    const e = performance.eventLoopUtilization(e0);
    const c = process.cpuUsage(c0);
    const t0 = performance.now();
    for (let i = 0; i < queries.length; i += batch) await backend.search(queries.slice(i, i + batch), 3);
    const seconds = (performance.now() - t0) / 1000;
    perPass.push({
      cpu: (c.user + c.system) / 1000 / queries.length,
      main: e.active / queries.length,
      throughput: queries.length / seconds,
    });
  }
  return {
    latency: median(latencies),
    throughput: median(perPass.map((r) => r.throughput)),
    cpu: median(perPass.map((r) => r.cpu)),
    main: median(perPass.map((r) => r.main)),
  };
}

/** The corpus file and its index in `dir`, built unless the same corpus was indexed there before. */
async function corpusIndex(dir: string, corpus: Passage[], efConstruction: number): Promise<string> {
  const file = join(dir, 'corpus.jsonl');
  const text = corpus.map((p) => `${JSON.stringify(p)}\n`).join('');
  const index = join(dir, 'index');
  const built = existsSync(join(index, 'meta.json')) ? await readMeta(index) : null;
  if (built?.efConstruction === efConstruction && (await readFile(file, 'utf8').catch(() => '')) === text) {
    console.log(`index: reusing ${index}`);
    return index;
  }
  await mkdir(dir, { recursive: true });
  await writeFile(file, text);
  const t0 = performance.now();
  const meta = await buildIndex({
    corpus: file,
    out: index,
    embedder: { kind: 'lexical' },
    hnsw: { efConstruction },
  });
  console.log(
    `index build ${((performance.now() - t0) / 1000).toFixed(1)}s (efConstruction ${efConstruction}, ${meta.fingerprint})`,
  );
  return index;
}

async function main(): Promise<void> {
  const target = arg('passages', 0);
  const nQueries = arg('queries', 300);
  const passes = arg('passes', 3);
  const batch = arg('batch', 64);
  const keep = stringArg('dir');
  const efConstruction = arg('ef-construction', HNSW_DEFAULTS.efConstruction);
  const { corpus, queries: all } = worldText(target);
  const queries = all.slice(0, nQueries);
  console.log(`corpus ${corpus.length} passages, ${queries.length} queries, top-3, ${passes} passes`);
  const dir = keep ?? (await mkdtemp(join(tmpdir(), 'akbe-bench-search-')));
  try {
    const indexDir = await corpusIndex(dir, corpus, efConstruction);
    let t0 = performance.now();
    const brute = bruteForceBackend(corpus);
    console.log(`brute-force setup ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    t0 = performance.now();
    await using service = await IndexSearcher.open(indexDir, { ef: TRAINING_SEARCH_EF, exact: true });
    console.log(`service open (${service.method}) ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    await using hnsw = await IndexSearcher.open(indexDir, { ef: TRAINING_SEARCH_EF });

    const want = await brute.search(queries, 3);
    const ids = (hits: SearchHit[]) => hits.map((h) => h.id).join();
    for (const [name, backend] of [
      ['service', service],
      ['hnsw', hnsw],
    ] as const) {
      const got = await backend.search(queries, 3);
      const same = queries.filter((_, i) => ids(got[i]) === ids(want[i])).length;
      console.log(`${name}: top-3 identical to brute force on ${same}/${queries.length} queries`);
    }
    const base = await measure(brute, queries, batch, passes);
    const f = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(4));
    console.log(
      `brute force: latency ${f(base.latency)} ms, throughput ${f(base.throughput)} q/s (${batch}/call), ` +
        `CPU ${f(base.cpu)} ms/q, main thread ${f(base.main)} ms/q`,
    );
    for (const [name, backend] of [
      ['service', service],
      [`hnsw ef ${TRAINING_SEARCH_EF}`, hnsw],
    ] as const) {
      const m = await measure(backend, queries, batch, passes);
      const x = (a: number, b: number) => `${(a / b).toFixed(1)}x`;
      console.log(
        `${name}: latency ${f(m.latency)} ms = ${x(base.latency, m.latency)}, ` +
          `throughput ${f(m.throughput)} q/s = ${x(m.throughput, base.throughput)}, ` +
          `CPU ${f(m.cpu)} ms/q = ${x(base.cpu, m.cpu)}, main thread ${f(m.main)} ms/q = ${x(base.main, m.main)}`,
      );
    }
    console.log(
      `load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (${os.cpus().length} cores)`,
    );
  } finally {
    if (!keep) await rm(dir, { recursive: true, force: true });
  }
}

await main();
