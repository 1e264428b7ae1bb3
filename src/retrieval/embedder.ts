/**
 * The embedder interface shared by the lexical default and e5. An index stores the fingerprint
 * of the embedder that built it; a query embedder with another fingerprint would produce vectors
 * in a different space, so opening such an index is refused (see store.ts).
 */
import { fmix32 } from '../util/rng.js';

export interface Embedder {
  /** Short kind name: `lexical` or `e5`. */
  readonly name: string;
  /** Vector length. */
  readonly dim: number;
  /** Identifies the exact vector space, e.g. `lexical(dim=1024,...,idf=1a2b3c4d)`. */
  readonly fingerprint: string;
  /** One L2-normalised row per text (e5 adds the `query: ` prefix). */
  embedQueries(texts: string[]): Promise<Float32Array[]>;
  /** One L2-normalised row per text (e5 adds the `passage: ` prefix). */
  embedPassages(texts: string[]): Promise<Float32Array[]>;
  close(): Promise<void>;
}

export const EMBEDDER_KINDS = ['lexical', 'e5'] as const;
export type EmbedderKind = (typeof EMBEDDER_KINDS)[number];

/** Scales a row to unit length in place; an all-zero row stays zero. Returns the row. */
export function l2Normalize(row: Float32Array): Float32Array {
  let ss = 0;
  for (let i = 0; i < row.length; i++) ss += row[i] * row[i];
  if (ss > 0) {
    const inv = 1 / Math.sqrt(ss);
    for (let i = 0; i < row.length; i++) row[i] *= inv;
  }
  return row;
}

/** FNV-1a over UTF-16 code units, then the murmur3 finaliser so that low bits mix well. */
export function hashString(s: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

/** An 8-hex-digit digest of bytes (for fingerprints, not security). */
export function digestBytes(bytes: Uint8Array): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return fmix32(h).toString(16).padStart(8, '0');
}
