/**
 * Search-tool benchmark: HNSW (hnswlib-node, inner product) against an exact TypeScript scan,
 * and e5 embedding throughput with a locally built e5-small-shaped BERT.
 *
 *   npm run build && node dist/bench/index.js            # N = 20k and 100k, dim 768
 *   node dist/bench/index.js --quick                     # N = 5k and 20k, fewer queries
 *   flags: --sizes 20000,100000 --dim 768 --queries 200 --efs 32,64,128 --seed 1 --skip-e5
 *          --skip-hnsw --e5-passages 128
 *
 * Data: unit vectors around 200 random centres (noise sd 1 per coordinate around centres of sd
 * 1), so neighbourhoods are clustered as real embeddings are; queries are fresh draws from the
 * same mixture. Every figure is single-threaded: QPS is the median of 3 timed passes over
 * all queries; recall@3 is |HNSW top-3 ∩ exact top-3| / 3 averaged over queries. Rates are
 * given per wall-clock second and per CPU-second of this process: on a shared machine the CPU
 * figures (and their ratio) are the ones that do not depend on other load.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E5_SMALL_SHAPE, writeBertModel } from '../src/retrieval/bert-model.js';
import { E5Embedder } from '../src/retrieval/e5.js';
import { bruteForceTopK, HnswIndex } from '../src/retrieval/hnsw.js';
import { deriveSeed, Rng } from '../src/util/rng.js';

interface Args {
  sizes: number[];
  dim: number;
  queries: number;
  efs: number[];
  seed: number;
  e5: boolean;
  e5Passages: number;
}

function parseArgs(argv: string[]): Args {
  const quick = argv.includes('--quick');
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const list = (s: string | undefined, fallback: number[]) => (s ? s.split(',').map(Number) : fallback);
  return {
    sizes: argv.includes('--skip-hnsw') ? [] : list(get('sizes'), quick ? [5000, 20000] : [20000, 100000]),
    dim: Number(get('dim') ?? 768),
    queries: Number(get('queries') ?? (quick ? 50 : 200)),
    efs: list(get('efs'), [32, 64, 128]),
    seed: Number(get('seed') ?? 1),
    e5: !argv.includes('--skip-e5'),
    e5Passages: Number(get('e5-passages') ?? (quick ? 32 : 128)),
  };
}

/** n unit rows [n, dim] from a mixture of `centres` Gaussians. */
function clustered(n: number, dim: number, centres: Float32Array[], rng: Rng): Float32Array {
  const out = new Float32Array(n * dim);
  for (let r = 0; r < n; r++) {
    const c = centres[rng.int(centres.length)];
    let ss = 0;
    for (let j = 0; j < dim; j++) {
      const v = c[j] + rng.normal();
      out[r * dim + j] = v;
      ss += v * v;
    }
    const inv = 1 / Math.sqrt(ss);
    for (let j = 0; j < dim; j++) out[r * dim + j] *= inv;
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** CPU seconds (user + system) of this process: unlike wall time, not inflated by other load. */
const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** Wall-clock and CPU-time QPS of `fn` (which answers nq queries): medians of `passes` runs. */
function timeQps(nq: number, fn: () => void, passes = 3): { wall: number; cpu: number } {
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let p = 0; p < passes; p++) {
    const t0 = performance.now();
    const c0 = cpuSeconds();
    fn();
    cpu.push(nq / (cpuSeconds() - c0));
    wall.push(nq / ((performance.now() - t0) / 1000));
  }
  return { wall: median(wall), cpu: median(cpu) };
}

async function benchHnsw(args: Args, n: number): Promise<Record<string, number>> {
  const { dim } = args;
  const rng = new Rng(deriveSeed(args.seed, 'bench-index', n));
  const centres = Array.from({ length: 200 }, () => Float32Array.from({ length: dim }, () => rng.normal()));
  const data = clustered(n, dim, centres, rng);
  const queries = clustered(args.queries, dim, centres, rng);
  const row = (m: Float32Array, i: number) => m.subarray(i * dim, (i + 1) * dim);

  const t0 = performance.now();
  const c0 = cpuSeconds();
  const index = HnswIndex.create(dim, n, { m: 16, efConstruction: 200, seed: 100 });
  for (let i = 0; i < n; i++) index.add(row(data, i), i);
  const buildS = (performance.now() - t0) / 1000;
  const buildCpuS = cpuSeconds() - c0;

  // Exact answers, timed: one pass (a scan of n x dim floats per query is already slow).
  const exact: number[][] = [];
  const tb = performance.now();
  const cb = cpuSeconds();
  for (let q = 0; q < args.queries; q++) exact.push(bruteForceTopK(data, dim, row(queries, q), 3).labels);
  const bruteQps = args.queries / ((performance.now() - tb) / 1000);
  const bruteQpsCpu = args.queries / (cpuSeconds() - cb);

  const out: Record<string, number> = { n, dim, buildS, buildCpuS, bruteQps, bruteQpsCpu };
  for (const ef of args.efs) {
    let found = 0;
    for (let q = 0; q < args.queries; q++) {
      const got = index.search(row(queries, q), 3, ef).labels;
      found += got.filter((l) => exact[q].includes(l)).length;
    }
    const qps = timeQps(args.queries, () => {
      for (let q = 0; q < args.queries; q++) index.search(row(queries, q), 3, ef);
    });
    out[`recall3_ef${ef}`] = found / (3 * args.queries);
    out[`qps_ef${ef}`] = qps.wall;
    out[`qpsCpu_ef${ef}`] = qps.cpu;
    out[`speedup_ef${ef}`] = qps.wall / bruteQps;
    out[`speedupCpu_ef${ef}`] = qps.cpu / bruteQpsCpu;
  }
  return out;
}

async function benchE5(args: Args): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'akbe-bench-e5-'));
  try {
    // Pseudo-words, 95% of them in the vocab (the rest split into ## pieces), in
    // passages of ~100 words like Search-R1's wiki-18 chunks.
    const rng = new Rng(deriveSeed(args.seed, 'bench-e5'));
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    const words = Array.from({ length: 4000 }, () =>
      Array.from({ length: 3 + rng.int(7) }, () => rng.pick([...letters])).join(''),
    );
    const passages = Array.from({ length: args.e5Passages }, () =>
      Array.from({ length: 100 }, (_, i) => `${rng.pick(words)}${i % 12 === 11 ? '.' : ''}`).join(' '),
    );
    const t0 = performance.now();
    const { model, vocab } = await writeBertModel(dir, {
      shape: E5_SMALL_SHAPE,
      words: words.slice(0, 3800),
      vocabSize: 30522,
      seed: 3,
      scale: 0.02,
    });
    const modelS = (performance.now() - t0) / 1000;
    const out: Record<string, number> = { modelBuildS: modelS };
    for (const threads of [1, 2]) {
      const e5 = await E5Embedder.create({ model, vocab, threads, batchSize: 32 });
      await e5.embedPassages(passages.slice(0, 8)); // warm-up
      const rates: number[] = [];
      const cpuRates: number[] = [];
      for (let p = 0; p < 3; p++) {
        const t1 = performance.now();
        const c1 = cpuSeconds(); // the whole process, so the worker's ORT threads count
        await e5.embedPassages(passages);
        rates.push(passages.length / ((performance.now() - t1) / 1000));
        cpuRates.push(passages.length / (cpuSeconds() - c1));
      }
      out[`passagesPerS_threads${threads}`] = median(rates);
      out[`passagesPerCpuS_threads${threads}`] = median(cpuRates);
      await e5.close();
    }
    const { WordPieceTokenizer } = await import('../src/retrieval/wordpiece.js');
    const tok = await WordPieceTokenizer.fromFile(vocab);
    out.tokensPerPassage =
      passages.reduce((s, p) => s + tok.encode(`passage: ${p}`).ids.length, 0) / passages.length;
    return out;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const fmt = (v: number) =>
  Number.isInteger(v) ? String(v) : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(4);

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const results: Record<string, unknown> = { args };
  for (const n of args.sizes) {
    process.stderr.write(`hnsw: N=${n} dim=${args.dim} ...\n`);
    const r = await benchHnsw(args, n);
    results[`hnsw_${n}`] = r;
    const lines = [
      `N=${n} dim=${args.dim}: build ${fmt(r.buildS)} s wall / ${fmt(r.buildCpuS)} s CPU; brute force ${fmt(r.bruteQps)} QPS wall, ${fmt(r.bruteQpsCpu)} per CPU-second`,
    ];
    for (const ef of args.efs) {
      lines.push(
        `  ef=${ef}: recall@3 ${fmt(r[`recall3_ef${ef}`])}; ${fmt(r[`qps_ef${ef}`])} QPS wall (${fmt(r[`speedup_ef${ef}`])}x), ${fmt(r[`qpsCpu_ef${ef}`])} per CPU-second (${fmt(r[`speedupCpu_ef${ef}`])}x)`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  if (args.e5) {
    process.stderr.write('e5: building an e5-small-shaped model (12 x 384, vocab 30522) ...\n');
    const r = await benchE5(args);
    results.e5 = r;
    process.stdout.write(
      `e5-small shape: ${fmt(r.passagesPerS_threads1)} passages/s wall, ${fmt(r.passagesPerCpuS_threads1)} per CPU-second (1 thread); ${fmt(r.passagesPerS_threads2)} passages/s wall (2 threads); ${fmt(r.tokensPerPassage)} tokens/passage; model build ${fmt(r.modelBuildS)} s\n`,
    );
  }
  process.stdout.write(`${JSON.stringify(results)}\n`);
}

await main();
