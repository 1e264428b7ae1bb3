/**
 * Corpus IO in the Search-R1 layout: one JSON object per line, `{"id": "...", "contents": "..."}`,
 * where the first line of `contents` is the passage title and the rest is its text.
 * Reading streams line by line, so a 21M-passage Wikipedia dump never sits in memory at once.
 *
 * A corpus is refused, naming file:line, when a line is not strict UTF-8 (a lenient decoder would
 * index U+FFFD in place of the bytes and nobody would notice), when an id repeats (search results
 * name passages by id, so a duplicate makes one of them unreachable) or when it has no passages.
 */
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';

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

/** The raw lines of a file as bytes (without `\n` or a `\r\n`'s `\r`), 1-based numbers. */
async function* byteLines(file: string): AsyncGenerator<{ line: number; bytes: Buffer }> {
  let rest: Buffer = Buffer.alloc(0);
  let line = 0;
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    let buf = rest.length ? Buffer.concat([rest, chunk]) : chunk;
    for (let nl = buf.indexOf(10); nl >= 0; nl = buf.indexOf(10)) {
      const end = nl > 0 && buf[nl - 1] === 13 ? nl - 1 : nl;
      yield { line: ++line, bytes: buf.subarray(0, end) };
      buf = buf.subarray(nl + 1);
    }
    rest = buf;
  }
  if (rest.length) yield { line: ++line, bytes: rest };
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A line's text; invalid UTF-8 is a CorpusFormatError naming the line and the first bad byte. */
function decodeLine(bytes: Buffer, file: string, line: number): string {
  try {
    return strictUtf8.decode(bytes);
  } catch (e) {
    const at = firstInvalidUtf8(bytes);
    const what = at < bytes.length ? `byte 0x${bytes[at].toString(16).padStart(2, '0')}` : 'end of line';
    throw new CorpusFormatError(file, line, `invalid UTF-8 (${what} at byte ${at + 1} of the line)`, {
      cause: e,
    });
  }
}

/** Where the first ill-formed UTF-8 sequence starts (RFC 3629 table 3-7), or bytes.length. */
function firstInvalidUtf8(b: Uint8Array): number {
  const inRange = (i: number, lo: number, hi: number) => i < b.length && b[i] >= lo && b[i] <= hi;
  let i = 0;
  while (i < b.length) {
    const c = b[i];
    // [second byte's range, number of continuation bytes] by lead byte; ASCII needs none.
    let second: [number, number];
    let n: number;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) [second, n] = [[0x80, 0xbf], 1];
    else if (c === 0xe0) [second, n] = [[0xa0, 0xbf], 2];
    else if (c === 0xed) [second, n] = [[0x80, 0x9f], 2];
    else if (c >= 0xe1 && c <= 0xef) [second, n] = [[0x80, 0xbf], 2];
    else if (c === 0xf0) [second, n] = [[0x90, 0xbf], 3];
    else if (c >= 0xf1 && c <= 0xf3) [second, n] = [[0x80, 0xbf], 3];
    else if (c === 0xf4) [second, n] = [[0x80, 0x8f], 3];
    else return i;
    if (!inRange(i + 1, second[0], second[1])) return i;
    for (let k = 2; k <= n; k++) if (!inRange(i + k, 0x80, 0xbf)) return i;
    i += n + 1;
  }
  return b.length;
}

/**
 * Streams the passages of a JSONL corpus in file order. Blank lines are skipped. Throws a
 * CorpusFormatError for invalid UTF-8, a malformed line, a repeated id (naming the first line
 * that had it) or a corpus without passages.
 */
export async function* readCorpus(file: string): AsyncGenerator<Passage> {
  // id -> the line that first had it (the error names both).
  const seen = new Map<string, number>();
  let lines = 0;
  for await (const { line, bytes } of byteLines(file)) {
    lines = line;
    const raw = decodeLine(bytes, file, line);
    if (raw.trim() === '') continue;
    const passage = parsePassage(raw, file, line);
    const first = seen.get(passage.id);
    if (first !== undefined)
      throw new CorpusFormatError(
        file,
        line,
        `duplicate passage id ${JSON.stringify(passage.id)} (first on line ${first})`,
      );
    seen.set(passage.id, line);
    yield passage;
  }
  if (seen.size === 0)
    throw new CorpusFormatError(
      file,
      Math.max(1, lines),
      lines === 0 ? 'no passages (the file is empty)' : `no passages (${lines} blank lines)`,
    );
}

/** Reads a whole corpus into memory (tests and small corpora). */
export async function loadCorpus(file: string): Promise<Passage[]> {
  const out: Passage[] = [];
  for await (const p of readCorpus(file)) out.push(p);
  return out;
}
