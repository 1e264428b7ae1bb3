/**
 * Exact top-k for sparse vectors: an inverted view of the passage rows (for each of the `dim`
 * slots, the rows where it is non-zero, by label). A lexical query sets ~11 of its 1,024 slots and
 * a world passage ~13, so a query touches the few rows that share a slot with it instead of every
 * row times every slot: what lets the lexical index answer without HNSW's per-query floor (at ef
 * 512 on a world's 976 passages hnswlib visits nearly every row; bench/search-service.ts).
 *
 * Results equal `bruteForceTopK`'s, scores included: a row's products are summed in the same slot
 * order, and the zero products the dense scan also adds change no sum. Rows the query does not
 * touch score exactly 0 and rank by label like any other tie.
 */
import type { TopK } from './hnsw.js';

export class InvertedRows {
  // Scratch reused by every search (one search runs at a time: search is synchronous).
  private readonly scores: Float64Array;
  private readonly touched: Uint8Array;
  private readonly touchedRows: Int32Array;

  private constructor(
    readonly dim: number,
    readonly count: number,
    /** Slot j's entries are `rows/values[start[j] .. start[j + 1])`, rows ascending. */
    private readonly start: Int32Array,
    private readonly rows: Int32Array,
    private readonly values: Float32Array,
  ) {
    this.scores = new Float64Array(count);
    this.touched = new Uint8Array(count);
    this.touchedRows = new Int32Array(count);
  }

  /** The view of `rows` ([n] rows of `dim` values; row i has label i). */
  static fromRows(rows: readonly Float32Array[], dim: number): InvertedRows {
    const start = new Int32Array(dim + 1);
    for (const row of rows) for (let j = 0; j < dim; j++) if (row[j] !== 0) start[j + 1]++;
    for (let j = 0; j < dim; j++) start[j + 1] += start[j];
    const fill = start.slice(0, dim);
    const labels = new Int32Array(start[dim]);
    const values = new Float32Array(start[dim]);
    rows.forEach((row, r) => {
      for (let j = 0; j < dim; j++)
        if (row[j] !== 0) {
          labels[fill[j]] = r;
          values[fill[j]++] = row[j];
        }
    });
    return new InvertedRows(dim, rows.length, start, labels, values);
  }

  /** Exact top-k by inner product, best first, ties to the lower label (as `bruteForceTopK`). */
  search(query: Float32Array, k: number): TopK {
    if (query.length !== this.dim)
      throw new RangeError(`inverted: query has ${query.length} values, rows have ${this.dim}`);
    const { scores, touched, touchedRows } = this;
    let nTouched = 0;
    for (let j = 0; j < this.dim; j++) {
      const q = query[j];
      if (q === 0) continue;
      for (let e = this.start[j]; e < this.start[j + 1]; e++) {
        const r = this.rows[e];
        if (!touched[r]) {
          touched[r] = 1;
          scores[r] = 0;
          touchedRows[nTouched++] = r;
        }
        scores[r] += this.values[e] * q;
      }
    }
    const top = new TopKBuffer(Math.min(k, this.count));
    for (let i = 0; i < nTouched; i++) top.offer(touchedRows[i], scores[touchedRows[i]]);
    // Untouched rows all score 0: only the lowest labels among them can rank.
    for (let r = 0, offered = 0; r < this.count && offered < top.k; r++)
      if (!touched[r]) {
        top.offer(r, 0);
        offered++;
      }
    for (let i = 0; i < nTouched; i++) touched[touchedRows[i]] = 0;
    return top.result();
  }
}

/** The k best (score descending, then label ascending) of the rows offered, in any order. */
class TopKBuffer {
  private readonly labels: number[] = [];
  private readonly scores: number[] = [];

  constructor(readonly k: number) {}

  offer(label: number, score: number): void {
    const { labels, scores, k } = this;
    if (k === 0) return;
    const before = (i: number) => scores[i] > score || (scores[i] === score && labels[i] < label);
    if (labels.length === k && before(k - 1)) return;
    if (labels.length < k) {
      labels.push(label);
      scores.push(score);
    }
    let pos = labels.length - 1;
    while (pos > 0 && !before(pos - 1)) {
      labels[pos] = labels[pos - 1];
      scores[pos] = scores[pos - 1];
      pos--;
    }
    labels[pos] = label;
    scores[pos] = score;
  }

  result(): TopK {
    return { labels: [...this.labels], scores: [...this.scores] };
  }
}
