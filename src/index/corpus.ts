/**
 * Corpus IO in the Search-R1 layout: one JSON object per line, `{"id": "...", "contents": "..."}`,
 * where the first line of `contents` is the passage title and the rest is its text.
 * Reading streams line by line, so a 21M-passage Wikipedia dump never sits in memory at once.
 */
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';

export interface Passage {
  id: string;
  /** `title\ntext`, as in Search-R1's wiki-18.jsonl. */
  contents: string;
}

/** A corpus line that is not valid JSON or lacks a field. `line` is 1-based. */
export class CorpusFormatError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly problem: string,
    options?: ErrorOptions,
  ) {
    super(
      `${basename(file)}:${line}: ${problem} (file ${file}; expected one {"id","contents"} object per line)`,
      options,
    );
    this.name = 'CorpusFormatError';
  }
}

/** Title and body of a passage: the title is the first line of `contents`. */
export function splitTitle(contents: string): { title: string; text: string } {
  const nl = contents.indexOf('\n');
  if (nl < 0) return { title: contents, text: '' };
  return { title: contents.slice(0, nl), text: contents.slice(nl + 1) };
}

/**
 * Validates one parsed line. Numeric ids are accepted (some dumps use them) and kept as strings;
 * anything else is a `CorpusFormatError` naming the line.
 */
export function parsePassage(raw: string, file: string, line: number): Passage {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (e) {
    throw new CorpusFormatError(file, line, 'invalid JSON', { cause: e });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new CorpusFormatError(file, line, 'not a JSON object');
  const record = value as Record<string, unknown>;
  if (!('id' in record)) throw new CorpusFormatError(file, line, 'missing field "id"');
  if (!('contents' in record)) throw new CorpusFormatError(file, line, 'missing field "contents"');
  const { id, contents } = record;
  if (typeof id !== 'string' && typeof id !== 'number')
    throw new CorpusFormatError(file, line, 'field "id" must be a string or number');
  if (typeof contents !== 'string')
    throw new CorpusFormatError(file, line, 'field "contents" must be a string');
  return { id: String(id), contents };
}

/** Streams the passages of a JSONL corpus in file order. Blank lines are skipped. */
export async function* readCorpus(file: string): AsyncGenerator<Passage> {
  const lines = createInterface({
    input: createReadStream(file, { encoding: 'utf8' }),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let line = 0;
  try {
    for await (const raw of lines) {
      line++;
      if (raw.trim() === '') continue;
      yield parsePassage(raw, file, line);
    }
  } finally {
    lines.close();
  }
}

/** Reads a whole corpus into memory (tests and small corpora). */
export async function loadCorpus(file: string): Promise<Passage[]> {
  const out: Passage[] = [];
  for await (const p of readCorpus(file)) out.push(p);
  return out;
}
