/**
 * Retrieval for the pretraining demonstrations: the same lexical embedder the search service uses
 * by default (src/retrieval/lexical.ts, hashed TF-IDF), scored exactly (brute-force inner product) and
 * synchronously, so that the observations the base policy learns to read are the ones it will get
 * from `akbe` search at evaluation. Document frequencies are fitted on the FULL corpus (as the
 * search index is); only the candidate set is restricted, to keep unknown entities' passages out
 * of the mix.
 */
import { bruteForceTopK, stackRows } from '../retrieval/hnsw.js';
import { LEXICAL_DEFAULTS, LexicalEmbedder } from '../retrieval/lexical.js';
import { formatObservation } from '../retrieval/observation.js';

export interface RetrievablePassage {
  id: string;
  contents: string;
}

/** What a demonstration needs from a search tool: the top-k passages of a query. */
export interface Retriever<P extends RetrievablePassage = RetrievablePassage> {
  search(query: string, k: number): P[];
}

export class LexicalRetriever<P extends RetrievablePassage> implements Retriever<P> {
  private readonly embedder: LexicalEmbedder;
  private readonly matrix: Float32Array;

  /** `corpus` fixes the idf (the whole corpus); `candidates` are the passages that can be returned. */
  constructor(
    corpus: readonly RetrievablePassage[],
    private readonly candidates: readonly P[],
  ) {
    this.embedder = LexicalEmbedder.fit(
      corpus.map((p) => p.contents),
      LEXICAL_DEFAULTS,
    );
    this.matrix = stackRows(
      candidates.map((p) => this.embedder.embed(p.contents)),
      this.embedder.dim,
    );
  }

  private readonly cache = new Map<string, P[]>();

  /** Top-k by inner product, ties to the earlier candidate; repeated queries are served from a cache. */
  search(query: string, k: number): P[] {
    const key = `${k}\u0000${query}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const found = this.searchUncached(query, k);
    this.cache.set(key, found);
    return found;
  }

  private searchUncached(query: string, k: number): P[] {
    const top = bruteForceTopK(this.matrix, this.embedder.dim, this.embedder.embed(query), k);
    return top.labels.map((l) => this.candidates[l]);
  }
}

/** The observation text of retrieved passages, as the search service formats it, on one line
 *  (the tokenizer reads any whitespace as one space, so this is the text the policy sees). */
export function observationText(passages: readonly RetrievablePassage[]): string {
  return formatObservation(passages).trim().replace(/\s+/g, ' ');
}
