/**
 * The observation text inserted after a `<search>` call, in Search-R1's format:
 *
 *   Doc 1(Title: Paris) Paris is the capital of France...
 *   Doc 2(Title: ...) ...
 *
 * Length cap, in characters (the policy's tokenizer is not known here, and characters bound
 * tokens from above for any byte/word-piece tokenizer): each document gets an equal share of
 * `maxChars`, and a text longer than its share is cut at a word boundary and ends with `...`.
 * Shares are fixed up front so that one long passage never crowds out the others.
 */
import { splitTitle } from './corpus.js';

export interface ObservationOptions {
  /** Upper bound on the returned string's length (default 1500, about 3 wiki-18 passages). */
  maxChars?: number;
}

export const DEFAULT_OBSERVATION_CHARS = 1500;

/** Formats retrieved passages (`contents` = `title\ntext`) as one observation string. */
export function formatObservation(
  docs: ReadonlyArray<{ contents: string }>,
  opts: ObservationOptions = {},
): string {
  const maxChars = opts.maxChars ?? DEFAULT_OBSERVATION_CHARS;
  if (docs.length === 0) return '';
  const share = Math.floor(maxChars / docs.length);
  let out = '';
  docs.forEach((doc, i) => {
    const { title, text } = splitTitle(doc.contents);
    const head = `Doc ${i + 1}(Title: ${title}) `;
    const body = text.replace(/\s+/g, ' ').trim();
    out += fit(head, body, share);
  });
  return out;
}

/** `head + body + '\n'` in at most `share` characters. */
function fit(head: string, body: string, share: number): string {
  const full = `${head}${body}\n`;
  if (full.length <= share) return full;
  const room = share - head.length - '...\n'.length;
  if (room <= 0) return `${head}...\n`.slice(0, Math.max(share, 0));
  let cut = body.slice(0, room);
  const space = cut.lastIndexOf(' ');
  if (space > room / 2) cut = cut.slice(0, space);
  return `${head}${cut}...\n`;
}
