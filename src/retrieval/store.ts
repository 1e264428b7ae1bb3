/**
 * The on-disk index: building it from a corpus and the file layout it leaves behind.
 *
 *   DIR/meta.json        format, embedder fingerprint + settings, dim, count, M, efConstruction
 *   DIR/hnsw.bin         hnswlib HierarchicalNSW ('ip'); label i = row i of passages.jsonl
 *   DIR/passages.jsonl   the passages `{"id","contents"}` in label order (this is the id map)
 *   DIR/offsets.f64      float64 byte offsets of each passages.jsonl line, plus the file length
 *   DIR/lexical-df.u32   document frequencies (lexical embedder only)
 *
 * A build writes into a temporary sibling directory and renames it onto DIR only when complete,
 * so a failed build (bad corpus line, crash, Ctrl-C) never leaves a half-written index.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, open, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Progress } from '../util/progress.js';
import { type Passage, readCorpus } from './corpus.js';
import { E5Embedder } from './e5.js';
import type { Embedder, EmbedderKind } from './embedder.js';
import { HNSW_DEFAULTS, HnswIndex, type HnswParams } from './hnsw.js';
import { DocumentFrequencies, LEXICAL_DEFAULTS, LexicalEmbedder, type LexicalParams } from './lexical.js';

export const INDEX_FORMAT = 'akbe-index/1';
export const META_FILE = 'meta.json';
export const HNSW_FILE = 'hnsw.bin';
export const PASSAGES_FILE = 'passages.jsonl';
export const OFFSETS_FILE = 'offsets.f64';

/** How to make the embedder; stored in meta.json so `serve` can recreate the query side. */
export type EmbedderSpec =
  | { kind: 'lexical'; params?: Partial<LexicalParams> }
  | { kind: 'e5'; model: string; vocab: string; maxLength?: number; threads?: number };

export interface IndexMeta {
  format: typeof INDEX_FORMAT;
  embedder: EmbedderKind;
  fingerprint: string;
  dim: number;
  count: number;
  M: number;
  efConstruction: number;
  seed: number;
  /** Settings needed to recreate the query embedder. */
  lexical?: LexicalParams & { docs: number };
  e5?: { model: string; vocab: string; maxLength: number };
  corpus: string;
  builtAt: string;
  buildSeconds: number;
}

export class IndexBuildError extends Error {
  constructor(
    message: string,
    readonly out: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'IndexBuildError';
  }
}

export class IndexNotFoundError extends Error {
  constructor(
    readonly dir: string,
    options?: ErrorOptions,
  ) {
    super(
      `no akbe index at ${dir} (${META_FILE} missing or unreadable); build one with: akbe index build --corpus FILE --out ${dir}`,
      options,
    );
    this.name = 'IndexNotFoundError';
  }
}

export interface BuildIndexOptions {
  corpus: string;
  out: string;
  embedder: EmbedderSpec;
  hnsw?: Partial<HnswParams>;
  /** Passages per embedding call. */
  batchSize?: number;
  /** Where progress goes; false for none (default: stderr). */
  progress?: NodeJS.WritableStream | false;
  /** Aborting stops the build between batches and removes the partial build (Ctrl-C). */
  signal?: AbortSignal;
}

/** Builds an index from a corpus; returns its meta. Nothing appears at `out` unless it succeeds. */
export async function buildIndex(opts: BuildIndexOptions): Promise<IndexMeta> {
  const out = resolve(opts.out);
  await checkReplaceable(out);
  const started = Date.now();
  const hnswParams = { ...HNSW_DEFAULTS, ...opts.hnsw };
  const progressStream = opts.progress === false ? null : (opts.progress ?? process.stderr);
  const tmp = await mkdtemp(join(dirname(out), `.${basename(out)}.building-`));
  let embedder: Embedder | null = null;
  try {
    const { count, freq } = await scanCorpus(opts, progressStream);
    embedder = freq ? LexicalEmbedder.fromFrequencies(freq) : await createEmbedder(opts.embedder);
    const index = HnswIndex.create(embedder.dim, count, hnswParams);
    const { offsets, passages } = await embedCorpus(opts, embedder, index, tmp, count, progressStream);
    if (passages !== count)
      throw new IndexBuildError(
        `corpus ${opts.corpus} changed during the build (${count} then ${passages} passages)`,
        out,
      );
    index.write(join(tmp, HNSW_FILE));
    await writeFile(join(tmp, OFFSETS_FILE), new Uint8Array(offsets.buffer));
    const meta: IndexMeta = {
      format: INDEX_FORMAT,
      embedder: embedder.name as EmbedderKind,
      fingerprint: embedder.fingerprint,
      dim: embedder.dim,
      count,
      M: hnswParams.m,
      efConstruction: hnswParams.efConstruction,
      seed: hnswParams.seed,
      corpus: resolve(opts.corpus),
      builtAt: new Date().toISOString(),
      buildSeconds: (Date.now() - started) / 1000,
    };
    if (embedder instanceof LexicalEmbedder) {
      await embedder.save(tmp);
      meta.lexical = { ...embedder.params, docs: embedder.docs };
    } else if (opts.embedder.kind === 'e5') {
      meta.e5 = {
        model: resolve(opts.embedder.model),
        vocab: resolve(opts.embedder.vocab),
        maxLength: opts.embedder.maxLength ?? 256,
      };
    }
    await writeFile(join(tmp, META_FILE), `${JSON.stringify(meta, null, 2)}\n`);
    await moveIntoPlace(tmp, out);
    return meta;
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  } finally {
    await embedder?.close();
  }
}

/**
 * Pass 1: validates every line before any expensive work, counts passages and (lexical) fits the
 * document frequencies the embedder is made from.
 */
async function scanCorpus(
  opts: BuildIndexOptions,
  progressStream: NodeJS.WritableStream | null,
): Promise<{ count: number; freq: DocumentFrequencies | null }> {
  const scan = progressStream ? new Progress('scanning corpus', { stream: progressStream }) : null;
  const freq =
    opts.embedder.kind === 'lexical'
      ? new DocumentFrequencies({ ...LEXICAL_DEFAULTS, ...opts.embedder.params })
      : null;
  let count = 0;
  for await (const p of readCorpus(opts.corpus)) {
    freq?.add(p.contents);
    count++;
    scan?.tick();
    if (count % 1024 === 0) opts.signal?.throwIfAborted();
  }
  scan?.finish();
  return { count, freq };
}

/**
 * Pass 2: embeds the corpus in batches, adds each row to the HNSW index under its label, and
 * copies the passages in label order into `tmp` with their byte offsets ([count + 1]).
 */
async function embedCorpus(
  opts: BuildIndexOptions,
  embedder: Embedder,
  index: HnswIndex,
  tmp: string,
  count: number,
  progressStream: NodeJS.WritableStream | null,
): Promise<{ offsets: Float64Array; passages: number }> {
  const passagesFile = await open(join(tmp, PASSAGES_FILE), 'w');
  const offsets = new Float64Array(count + 1);
  const bar = progressStream
    ? new Progress('embedding + indexing', { stream: progressStream, total: count })
    : null;
  let label = 0;
  let bytes = 0;
  const batchSize = opts.batchSize ?? 64;
  const flush = async (batch: Passage[]) => {
    opts.signal?.throwIfAborted();
    const rows = await embedder.embedPassages(batch.map((p) => p.contents));
    let chunk = '';
    for (let i = 0; i < batch.length; i++) {
      index.add(rows[i], label);
      const line = `${JSON.stringify({ id: batch[i].id, contents: batch[i].contents })}\n`;
      // A corpus that grew since pass 1 is refused by the caller; its extra rows get no offset.
      if (label < count) offsets[label] = bytes;
      bytes += Buffer.byteLength(line);
      chunk += line;
      label++;
    }
    await passagesFile.write(chunk);
    bar?.tick(batch.length);
  };
  try {
    let batch: Passage[] = [];
    for await (const p of readCorpus(opts.corpus)) {
      batch.push(p);
      if (batch.length >= batchSize) {
        await flush(batch);
        batch = [];
      }
    }
    if (batch.length) await flush(batch);
  } finally {
    await passagesFile.close();
  }
  bar?.finish();
  if (label === count) offsets[count] = bytes;
  return { offsets, passages: label };
}

/** Creates an embedder from its spec (e5's worker loads onnxruntime when it starts). */
export async function createEmbedder(spec: EmbedderSpec): Promise<Embedder> {
  if (spec.kind === 'e5') {
    return E5Embedder.create({
      model: spec.model,
      vocab: spec.vocab,
      maxLength: spec.maxLength,
      threads: spec.threads,
    });
  }
  throw new IndexBuildError(
    'a lexical embedder must be fitted on its corpus first (buildIndex does this)',
    '',
  );
}

export async function readMeta(dir: string): Promise<IndexMeta> {
  let meta: IndexMeta;
  try {
    meta = JSON.parse(await readFile(join(dir, META_FILE), 'utf8')) as IndexMeta;
  } catch (e) {
    throw new IndexNotFoundError(dir, { cause: e });
  }
  if (meta.format !== INDEX_FORMAT)
    throw new IndexNotFoundError(dir, {
      cause: new Error(`format '${meta.format}', expected '${INDEX_FORMAT}'`),
    });
  return meta;
}

/** `out` may be absent, an empty directory or an earlier index; anything else is refused. */
async function checkReplaceable(out: string): Promise<void> {
  if (!existsSync(out)) return;
  let entries: string[];
  try {
    entries = await readdir(out);
  } catch (e) {
    throw new IndexBuildError(`--out ${out} exists and is not a directory; choose another path`, out, {
      cause: e,
    });
  }
  if (entries.length > 0 && !entries.includes(META_FILE)) {
    throw new IndexBuildError(
      `--out ${out} is a non-empty directory that holds no akbe index; choose another path or empty it`,
      out,
    );
  }
}

async function moveIntoPlace(tmp: string, out: string): Promise<void> {
  await checkReplaceable(out);
  if (!existsSync(out)) {
    await rename(tmp, out);
    return;
  }
  if ((await readdir(out)).length === 0) {
    await rmdir(out);
    await rename(tmp, out);
    return;
  }
  // Replace an earlier index: move it aside first so a reader never sees a mix of the two.
  const old = `${tmp}.old`;
  await rename(out, old);
  await rename(tmp, out);
  await rm(old, { recursive: true, force: true });
}
