/**
 * The world's search index: `akbe index build` over the world's corpus (lexical embedder, hnswlib),
 * kept in `<world>/index`. `akbe world build` builds it; a run whose world has none builds it once
 * at setup (worlds written before the index existed). A run records the index's fingerprint in
 * run.started, and the search role refuses an index whose fingerprint differs (a rebuilt index
 * or another corpus would change what the policy reads mid-run).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildIndex, type IndexMeta, META_FILE, readMeta } from '../retrieval/store.js';

export const WORLD_INDEX_DIR = 'index';

/**
 * HNSW candidate list of the training search service. Lexical vectors of entity-centric text have
 * many near-equal neighbours: on the default world's 1,511 questions, ef 64 changed the top-3 of
 * 2.2%, ef 200 of one, ef 400 and up of none (bench/search-service.ts prints the agreement).
 */
export const TRAINING_SEARCH_EF = 512;

export function worldIndexDir(worldDir: string): string {
  return join(worldDir, WORLD_INDEX_DIR);
}

/** Builds the world's lexical index (replacing an earlier one). */
export async function buildWorldIndex(
  worldDir: string,
  opts: { progress?: NodeJS.WritableStream | false } = {},
): Promise<IndexMeta> {
  return buildIndex({
    corpus: join(worldDir, 'corpus.jsonl'),
    out: worldIndexDir(worldDir),
    embedder: { kind: 'lexical' },
    progress: opts.progress ?? false,
  });
}

/** The index at `dir` (default: the world's), built first when it is the world's and missing. */
export async function ensureWorldIndex(
  worldDir: string,
  dir = worldIndexDir(worldDir),
  log: (line: string) => void = () => undefined,
): Promise<IndexMeta> {
  if (existsSync(join(dir, META_FILE)) || dir !== worldIndexDir(worldDir)) return readMeta(dir);
  log(`search: ${worldDir} has no index yet; building ${dir} (once)`);
  return buildWorldIndex(worldDir);
}

/** The index at `dir` was not the one the run recorded. */
export class IndexFingerprintError extends Error {
  constructor(
    readonly dir: string,
    readonly found: string,
    readonly expected: string,
  ) {
    super(
      `search index ${dir} has fingerprint ${found}, but the run recorded ${expected}; ` +
        'restore the index the run started with (or start a new run on this one)',
    );
    this.name = 'IndexFingerprintError';
  }
}
