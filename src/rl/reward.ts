/**
 * Outcome reward, as in Search-R1 (which takes SQuAD's answer normalisation): an exact match of
 * the extracted answer against any gold answer, with no credit for a malformed trajectory.
 *
 * normalize_answer(s) = white_space_fix(remove_articles(remove_punc(lower(s)))), with Python 3
 * semantics reproduced exactly:
 * - `lower`: str.lower (JS toLowerCase is locale-independent and also applies the final-sigma rule);
 * - `remove_punc`: drop the 32 ASCII characters of string.punctuation (nothing else: `’` stays);
 * - `remove_articles`: re.sub(r"\b(a|an|the)\b", " ", s). On str patterns Python's \w is Unicode
 *   (letters, numbers, underscore), so the boundary is a lookaround on [\p{L}\p{N}_]: "the" in
 *   "theory" or "éthe" is kept, "the" between non-word characters is removed;
 * - `white_space_fix`: " ".join(s.split()), where str.split() splits on runs of Python's
 *   whitespace, which differs from JS \s: it includes \x1c-\x1f and \x85 and excludes \ufeff.
 */
import { checkFormat, DEFAULT_MAX_TOOL_CALLS } from './format.js';
import { pySplit, pyStrip } from './pytext.js';
import type { RolloutPath, TextSegment } from './types.js';

/** Python's string.punctuation: the 32 ASCII characters !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ */
const PUNCTUATION = /[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]/g;
/** Python's \b(a|an|the)\b on str: word characters are Unicode letters, numbers and underscore. */
const ARTICLES = /(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu;
/** SQuAD / Search-R1 answer normalisation (see the module comment for the exact semantics). */
export function normalizeAnswer(text: string): string {
  const noPunc = text.toLowerCase().replace(PUNCTUATION, '');
  const noArticles = noPunc.replace(ARTICLES, ' ');
  return pySplit(noArticles).join(' ');
}

/** 1 when the normalised prediction equals the normalised form of any gold answer. */
export function exactMatch(prediction: string, gold: string | readonly string[]): 0 | 1 {
  const golds = typeof gold === 'string' ? [gold] : gold;
  const p = normalizeAnswer(prediction);
  for (const g of golds) if (normalizeAnswer(g) === p) return 1;
  return 0;
}

/**
 * The content of the LAST `<answer>...</answer>` block (non-greedy, across newlines), stripped;
 * null when there is none. Search-R1's `extract_solution` does the same with
 * re.finditer(r"<answer>(.*?)</answer>", s, re.DOTALL) but applies it to prompt + response and so
 * requires two matches (the prompt's example is the first); we apply it to the response only, so
 * one match suffices.
 */
export function extractAnswer(text: string): string | null {
  let last: string | null = null;
  for (const m of text.matchAll(/<answer>([\s\S]*?)<\/answer>/g)) last = m[1];
  return last === null ? null : pyStrip(last);
}

/** A trajectory's score: reward, exact match, the format verdict with its reason, and the extracted answer. */
export interface TrajectoryScore {
  reward: number;
  em: 0 | 1;
  formatOk: boolean;
  formatReason: string;
  answer: string | null;
}

/**
 * Scores a finished response: reward = EM(answer, gold) when the tag grammar holds, else 0.
 * `maxToolCalls` bounds the number of searches the grammar accepts on the with-tool path.
 */
export function scoreTrajectory(
  response: string | readonly TextSegment[],
  path: RolloutPath,
  gold: string | readonly string[],
  opts: { maxToolCalls: number; toolTags?: readonly string[] } = { maxToolCalls: DEFAULT_MAX_TOOL_CALLS },
): TrajectoryScore {
  const format = checkFormat(response, path, opts);
  const text = typeof response === 'string' ? response : response.map((s) => s.text).join('');
  const answer = extractAnswer(text);
  if (!format.ok || answer === null)
    return { reward: 0, em: 0, formatOk: false, formatReason: format.reason, answer };
  const em = exactMatch(answer, gold);
  return { reward: em, em, formatOk: true, formatReason: 'ok', answer };
}
