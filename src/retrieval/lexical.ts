/**
 * The lexical default embedder: hashed TF-IDF over word unigrams and bigrams, folded into a
 * dense vector so that it shares the HNSW inner-product index with e5.
 *
 *   feature f (a word or `w1 w2`), h = hash(f)
 *   idf(f)   = ln((1 + N) / (1 + df[h mod B])) + 1        B = `buckets` (2^18): few collisions
 *   w(f)     = (1 + ln tf(f)) * idf(f)                     sublinear tf
 *   v[g(h)] += s(h) * w(f)                                 g: dense slot in [0, dim), s: ±1 sign
 *   v        = v / |v|
 *
 * Document frequencies are counted per hash bucket over the corpus (a wide table, so a rare
 * entity name rarely shares idf with a common word) and saved with the index. The signed
 * folding into `dim` slots keeps inner products unbiased: colliding features cancel on average
 * instead of piling up. Needs no download; entity names (rare words and their bigrams) dominate
 * the vectors, which is what entity-centric questions need.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fmix32 } from '../util/rng.js';
import { digestBytes, type Embedder, hashString, l2Normalize } from './embedder.js';

export interface LexicalParams {
  /** Dense vector length. */
  dim: number;
  /** Width of the document-frequency table (a power of two). */
  buckets: number;
  /** 1 = words only, 2 = words and adjacent word pairs. */
  maxNgram: 1 | 2;
}

export const LEXICAL_DEFAULTS: LexicalParams = {
  dim: 1024, // large enough that signed-hash noise stays small next to a rare term's weight
  buckets: 1 << 18, // 1 MiB of uint32 counts
  maxNgram: 2, // bigrams keep multi-word names ("new york") apart from their parts
};

/** File (in the index dir) holding the document-frequency table as little-endian uint32. */
export const LEXICAL_DF_FILE = 'lexical-df.u32';

/** Lowercased, accent-stripped words (letters and digits). */
export function lexicalTokens(text: string): string[] {
  return (
    text
      .normalize('NFKD')
      .replace(/\p{M}+/gu, '')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? []
  );
}

/** Hashes of the text's features (words, then word pairs when maxNgram is 2), with repeats. */
export function featureHashes(text: string, maxNgram: 1 | 2): number[] {
  const words = lexicalTokens(text);
  const out = words.map((w) => hashString(w));
  if (maxNgram === 2)
    for (let i = 1; i < words.length; i++) out.push(hashString(`${words[i - 1]} ${words[i]}`));
  return out;
}

/** Counts in how many documents each feature bucket occurs. */
export class DocumentFrequencies {
  readonly df: Uint32Array;
  docs = 0;

  constructor(readonly params: LexicalParams) {
    validateParams(params);
    this.df = new Uint32Array(params.buckets);
  }

  add(text: string): void {
    const mask = this.params.buckets - 1;
    const seen = new Set<number>();
    for (const h of featureHashes(text, this.params.maxNgram)) seen.add(h & mask);
    for (const b of seen) this.df[b]++;
    this.docs++;
  }
}

export class LexicalEmbedder implements Embedder {
  readonly name = 'lexical';
  readonly dim: number;
  readonly fingerprint: string;
  private readonly idf: Float32Array;

  constructor(
    readonly params: LexicalParams,
    readonly df: Uint32Array,
    readonly docs: number,
  ) {
    validateParams(params);
    if (df.length !== params.buckets)
      throw new RangeError(`lexical: df table has ${df.length} buckets, params say ${params.buckets}`);
    this.dim = params.dim;
    this.idf = new Float32Array(params.buckets);
    for (let b = 0; b < params.buckets; b++) this.idf[b] = Math.log((1 + docs) / (1 + df[b])) + 1;
    const digest = digestBytes(new Uint8Array(df.buffer, df.byteOffset, df.byteLength));
    this.fingerprint = `lexical(dim=${params.dim},buckets=${params.buckets},ngrams=${params.maxNgram},docs=${docs},df=${digest})`;
  }

  static fromFrequencies(freq: DocumentFrequencies): LexicalEmbedder {
    return new LexicalEmbedder(freq.params, freq.df, freq.docs);
  }

  /** Fits document frequencies on in-memory texts (tests, small corpora). */
  static fit(texts: Iterable<string>, params: LexicalParams = LEXICAL_DEFAULTS): LexicalEmbedder {
    const freq = new DocumentFrequencies(params);
    for (const t of texts) freq.add(t);
    return LexicalEmbedder.fromFrequencies(freq);
  }

  /** Writes the df table into an index dir; params and docs go into meta.json (see store.ts). */
  async save(dir: string): Promise<void> {
    await writeFile(
      join(dir, LEXICAL_DF_FILE),
      new Uint8Array(this.df.buffer, this.df.byteOffset, this.df.byteLength),
    );
  }

  static async load(dir: string, params: LexicalParams, docs: number): Promise<LexicalEmbedder> {
    const bytes = await readFile(join(dir, LEXICAL_DF_FILE));
    const df = new Uint32Array(bytes.byteLength / 4);
    new Uint8Array(df.buffer).set(bytes);
    return new LexicalEmbedder(params, df, docs);
  }

  /** The vector of one text (queries and passages are embedded the same way). */
  embed(text: string): Float32Array {
    const mask = this.params.buckets - 1;
    const tf = new Map<number, number>();
    for (const h of featureHashes(text, this.params.maxNgram)) tf.set(h, (tf.get(h) ?? 0) + 1);
    const row = new Float32Array(this.dim);
    for (const [h, count] of tf) {
      const w = (1 + Math.log(count)) * this.idf[h & mask];
      // A second mix decorrelates the dense slot and sign from the df bucket.
      const g = fmix32(h ^ 0x9e3779b9);
      row[g % this.dim] += g & 0x80000000 ? -w : w;
    }
    return l2Normalize(row);
  }

  async embedQueries(texts: string[]): Promise<Float32Array[]> {
    return texts.map((t) => this.embed(t));
  }

  async embedPassages(texts: string[]): Promise<Float32Array[]> {
    return texts.map((t) => this.embed(t));
  }

  async close(): Promise<void> {}
}

function validateParams(p: LexicalParams): void {
  if (!Number.isInteger(p.dim) || p.dim < 8)
    throw new RangeError(`lexical: dim must be an integer >= 8, got ${p.dim}`);
  if (!Number.isInteger(p.buckets) || p.buckets < 2 || (p.buckets & (p.buckets - 1)) !== 0) {
    throw new RangeError(`lexical: buckets must be a power of two, got ${p.buckets}`);
  }
  if (p.maxNgram !== 1 && p.maxNgram !== 2)
    throw new RangeError(`lexical: maxNgram must be 1 or 2, got ${p.maxNgram}`);
}
