/**
 * Opening an index for queries: the query embedder (recreated from meta.json, or supplied),
 * the HNSW index in its worker thread, and the passages read on demand by byte offset.
 */
import { type FileHandle, open, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { type Passage, splitTitle } from './corpus.js';
import type { Embedder } from './embedder.js';
import { HnswWorker } from './hnsw.js';
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
}

/** Reads passages by label from passages.jsonl using the stored byte offsets. */
export class PassageStore {
  private constructor(
    private readonly file: FileHandle,
    private readonly offsets: Float64Array,
  ) {}

  static async open(dir: string): Promise<PassageStore> {
    const bytes = await readFile(join(dir, OFFSETS_FILE));
    const offsets = new Float64Array(bytes.byteLength / 8);
    new Uint8Array(offsets.buffer).set(bytes);
    return new PassageStore(await open(join(dir, PASSAGES_FILE), 'r'), offsets);
  }

  get count(): number {
    return this.offsets.length - 1;
  }

  async get(label: number): Promise<Passage> {
    if (!(label >= 0 && label < this.count))
      throw new RangeError(`passage label ${label} out of range [0, ${this.count})`);
    const start = this.offsets[label];
    const length = this.offsets[label + 1] - start;
    const buf = Buffer.alloc(length);
    await this.file.read(buf, 0, length, start);
    return JSON.parse(buf.toString('utf8')) as Passage;
  }

  async close(): Promise<void> {
    await this.file.close();
  }
}

export class IndexSearcher implements SearchBackend, AsyncDisposable {
  private constructor(
    readonly dir: string,
    readonly meta: IndexMeta,
    readonly embedder: Embedder,
    private readonly hnsw: HnswWorker,
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
      const hnsw = await HnswWorker.start(join(dir, HNSW_FILE), meta.dim).catch(async (e) => {
        await passages.close();
        throw e;
      });
      return new IndexSearcher(dir, meta, embedder, hnsw, passages, opts.ef ?? 64, !opts.embedder);
    } catch (e) {
      if (!opts.embedder) await embedder.close();
      throw e;
    }
  }

  /** Top-k passages for each query, best first. */
  async search(queries: string[], k: number, ef = this.ef): Promise<SearchHit[][]> {
    if (queries.length === 0) return [];
    const rows = await this.embedder.embedQueries(queries);
    const tops = await this.hnsw.search(rows, k, Math.max(ef, k));
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
    await this.hnsw.close();
    await this.passages.close();
    if (this.ownsEmbedder) await this.embedder.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
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
