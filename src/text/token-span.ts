/**
 * Which tokens of a generated turn spell a given part of its text, from prefix decodes alone: the
 * policy's ids are never re-tokenized (token-in/token-out), so the only alignment between a turn's
 * tokens and its text is what decoding the first k tokens gives, for each k.
 *
 * A prefix decode is "clean" when it is a prefix of the whole turn's text. Byte-level BPE can end
 * a prefix inside a multi-byte character (the decode then ends in U+FFFD), and a decoder's
 * clean-up may rewrite text once later tokens arrive; such prefixes are not clean and bound
 * nothing. Between clean prefixes the boundaries are monotone, so the tokens of a character range
 * [cs, ce) (cs < ce) are [s, e) with
 *
 *   s = the largest k whose clean prefix ends at or before cs  (tokens before s lie wholly before it)
 *   e = the smallest k > s whose clean prefix reaches ce       (tokens from e on lie wholly after it)
 *
 * so every token that carries a character (or a byte of one) of the range is inside, and a token
 * that straddles the range's edge (`>Paris` merged across a tag) is included. The turn's full
 * decode is clean, so both exist and s < e.
 *
 * The ranges sought here end near the turn's end (a tool call closes the turn), so the scan runs
 * down from k = n and decodes only the prefixes it needs.
 */
import { type CharRange, toolCallChars } from '../rl/format.js';

/** A half-open token range [start, end) of a turn's (or a response's) tokens. */
export type TokenSpan = [start: number, end: number];

/**
 * The tokens [s, e) of a turn of `n` tokens whose text overlaps the characters `range` of the
 * turn's text. `prefixText(k)` is the text of the turn's first k tokens as the turn is read
 * (`env.turnText(tokens.slice(0, k), turn)`, asked for 1 <= k <= n only); prefixText(n) is the
 * whole turn. The range must be non-empty and inside the text.
 */
export function tokensOfChars(n: number, prefixText: (k: number) => string, range: CharRange): TokenSpan {
  const full = prefixText(n);
  const [cs, ce] = range;
  if (!(Number.isInteger(cs) && Number.isInteger(ce) && 0 <= cs && cs < ce && ce <= full.length))
    throw new RangeError(
      `character range [${cs}, ${ce}) must be non-empty and inside the text (${full.length} chars)`,
    );
  let e = n;
  for (let k = n - 1; k >= 1; k--) {
    const p = prefixText(k);
    if (!full.startsWith(p)) continue; // ends inside a character, or rewritten later: bounds nothing
    if (p.length <= cs) return [k, e];
    if (p.length >= ce) e = k;
  }
  // No tokens have no text (prefixText(0) is not asked: a Hugging Face decoder refuses no ids).
  return [0, e];
}

/**
 * The tokens of the tool call a turn ends with, by the tag grammar's rule (src/rl/format.ts
 * toolCallChars): the tokens of its stripped query, or, when the query is empty, of the call
 * itself (opening through closing tag), so every call has at least one token. Null when the turn
 * does not end in a call of `toolTags`.
 */
export function toolCallTokenSpan(
  n: number,
  prefixText: (k: number) => string,
  toolTags?: readonly string[],
): TokenSpan | null {
  if (n === 0) return null;
  const chars = toolCallChars(prefixText(n), toolTags);
  if (chars === null) return null;
  const [qs, qe] = chars.query;
  return tokensOfChars(n, prefixText, qs < qe ? chars.query : chars.call);
}
