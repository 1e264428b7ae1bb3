/**
 * Opening an index for queries: the query embedder (recreated from meta.json, or supplied),
 * the HNSW index in its worker thread, and the passages read on demand by byte offset.
 */
import { type FileHandle, open, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { type Passage, splitTitle } from './corpus.js';
import type { Embedder } from './embedder.js';
import { HnswWorker } from './hnsw.js';
import { InvertedRows } from './inverted.js';
import { LexicalEmbedder } from './lexical.js';
import { createEmbedder, HNSW_FILE, type IndexMeta, OFFSETS_FILE, PASSAGES_FILE, readMeta } from './store.js';

/** One retrieved passage. `score` is the inner product (cosine for unit vectors). */
export interface SearchHit {
  id: string;
  title: string;
  contents: string;
  score: number;
}

/** What the NATS service and the HTTP endpoint need from an index. */
export interface SearchBackend {
  search(queries: string[], k: number, ef?: number): Promise<SearchHit[][]>;
}

/** The query embedder lives in another vector space than the one the index was built in. */
export class EmbedderMismatchError extends Error {
  constructor(
    readonly dir: string,
    readonly indexFingerprint: string,
    readonly queryFingerprint: string,
  ) {
    super(
      `index at ${dir} was built with embedder ${indexFingerprint} but the query embedder is ${queryFingerprint}; ` +
        'rebuild the index with this embedder or query it with the one it was built with',
    );
    this.name = 'EmbedderMismatchError';
  }
}

export interface OpenIndexOptions {
  /** Use this query embedder instead of recreating the one recorded in meta.json. */
  embedder?: Embedder;
  /** e5 only: model/vocab paths overriding those recorded at build time. */
  model?: string;
  vocab?: string;
  /** Default HNSW ef for searches (>= k is enforced per search). */
  ef?: number;
  /**
   * Search a lexical index whose passages fit in memory (PASSAGE_CACHE_BYTES) exactly, through an
   * inverted view of its passage vectors (inverted.ts), instead of the HNSW graph: the same
   * results as the brute-force scan at a fraction of HNSW's per-query cost at that size. Other
   * indexes (e5's dense vectors, large corpora) use the graph either way. Default false.
   */
  exact?: boolean;
}

/** passages.jsonl files up to this size are read into memory once (a world: ~200 KB per 1k passages). */
export const PASSAGE_CACHE_BYTES = 64 * 1024 * 1024;

/**
 * Reads passages by label from passages.jsonl using the stored byte offsets: from memory when the
 * file is small (no file read per hit), else from the file on demand (wiki-18 is ~14 GB).
 */
export class PassageStore {
  private constructor(
    private readonly file: FileHandle | null,
    private readonly bytes: Buffer | null,
    private readonly offsets: Float64Array,
  ) {}

  static async open(dir: string, cacheBytes = PASSAGE_CACHE_BYTES): Promise<PassageStore> {
    const raw = await readFile(join(dir, OFFSETS_FILE));
    const offsets = new Float64Array(raw.byteLength / 8);
    new Uint8Array(offsets.buffer).set(raw);
    const size = offsets[offsets.length - 1] ?? 0;
    if (size <= cacheBytes) return new PassageStore(null, await readFile(join(dir, PASSAGES_FILE)), offsets);
    return new PassageStore(await open(join(dir, PASSAGES_FILE), 'r'), null, offsets);
  }

  get count(): number {
    return this.offsets.length - 1;
  }

  /** The passages are held in memory (the file is at most the cache size). */
  get inMemory(): boolean {
    return this.bytes !== null;
  }

  async get(label: number): Promise<Passage> {
    if (!(label >= 0 && label < this.count))
      throw new RangeError(`passage label ${label} out of range [0, ${this.count})`);
    const start = this.offsets[label];
    const end = this.offsets[label + 1];
    if (this.bytes) return JSON.parse(this.bytes.toString('utf8', start, end)) as Passage;
    const buf = Buffer.alloc(end - start);
    await this.file!.read(buf, 0, end - start, start);
    return JSON.parse(buf.toString('utf8')) as Passage;
  }

  async close(): Promise<void> {
    await this.file?.close();
  }
}

export class IndexSearcher implements SearchBackend, AsyncDisposable {
  private constructor(
    readonly dir: string,
    readonly meta: IndexMeta,
    readonly embedder: Embedder,
    /** Exactly one of the two answers the searches: the HNSW graph in its worker, or the inverted view. */
    private readonly rows: { hnsw: HnswWorker; inverted?: never } | { inverted: InvertedRows; hnsw?: never },
    private readonly passages: PassageStore,
    readonly ef: number,
    private readonly ownsEmbedder: boolean,
  ) {}

  static async open(dirArg: string, opts: OpenIndexOptions = {}): Promise<IndexSearcher> {
    const dir = resolve(dirArg);
    const meta = await readMeta(dir);
    const embedder = opts.embedder ?? (await queryEmbedderFor(dir, meta, opts));
    try {
      if (embedder.fingerprint !== meta.fingerprint)
        throw new EmbedderMismatchError(dir, meta.fingerprint, embedder.fingerprint);
      const passages = await PassageStore.open(dir);
      const rows = await openRows(dir, meta, embedder, passages, opts.exact ?? false).catch(async (e) => {
        await passages.close();
        throw e;
      });
      return new IndexSearcher(dir, meta, embedder, rows, passages, opts.ef ?? 64, !opts.embedder);
    } catch (e) {
      if (!opts.embedder) await embedder.close();
      throw e;
    }
  }

  /** How searches are answered: 'exact' (the inverted view) or 'hnsw' (the graph). */
  get method(): 'exact' | 'hnsw' {
    return this.rows.inverted ? 'exact' : 'hnsw';
  }

  /** Top-k passages for each query, best first. */
  async search(queries: string[], k: number, ef = this.ef): Promise<SearchHit[][]> {
    if (queries.length === 0) return [];
    const rows = await this.embedder.embedQueries(queries);
    const { inverted, hnsw } = this.rows;
    const tops = inverted
      ? rows.map((row) => inverted.search(row, k))
      : await hnsw.search(rows, k, Math.max(ef, k));
    return Promise.all(
      tops.map((top) =>
        Promise.all(
          top.labels.map(async (label, i) => {
            const p = await this.passages.get(label);
            return {
              id: p.id,
              title: splitTitle(p.contents).title,
              contents: p.contents,
              score: top.scores[i],
            };
          }),
        ),
      ),
    );
  }

  async close(): Promise<void> {
    await this.rows.hnsw?.close();
    await this.passages.close();
    if (this.ownsEmbedder) await this.embedder.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** The rows searches run over: the inverted view when asked for and possible, else the HNSW graph. */
async function openRows(
  dir: string,
  meta: IndexMeta,
  embedder: Embedder,
  passages: PassageStore,
  exact: boolean,
): Promise<{ hnsw: HnswWorker } | { inverted: InvertedRows }> {
  if (exact && meta.embedder === 'lexical' && passages.inMemory) {
    // The lexical embedder is deterministic and fingerprint-checked: these are the index's rows.
    const texts: string[] = [];
    for (let label = 0; label < passages.count; label++) texts.push((await passages.get(label)).contents);
    return { inverted: InvertedRows.fromRows(await embedder.embedPassages(texts), meta.dim) };
  }
  return { hnsw: await HnswWorker.start(join(dir, HNSW_FILE), meta.dim) };
}

/** Recreates the query embedder an index was built with (e5 paths may be overridden). */
async function queryEmbedderFor(dir: string, meta: IndexMeta, opts: OpenIndexOptions): Promise<Embedder> {
  if (meta.embedder === 'lexical' && meta.lexical) {
    const { docs, ...params } = meta.lexical;
    return LexicalEmbedder.load(dir, params, docs);
  }
  if (meta.embedder === 'e5') {
    const model = opts.model ?? meta.e5?.model;
    const vocab = opts.vocab ?? meta.e5?.vocab;
    if (!model || !vocab)
      throw new Error(
        `index at ${dir} uses e5 but no model/vocab is recorded; pass --model FILE --vocab FILE`,
      );
    return createEmbedder({ kind: 'e5', model, vocab, maxLength: meta.e5?.maxLength });
  }
  throw new Error(`index at ${dir}: unknown embedder '${meta.embedder}' in meta.json; rebuild the index`);
}
