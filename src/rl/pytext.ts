/**
 * Python 3 string semantics that the reward must match exactly. Python's str.split() and
 * str.strip() (no argument) use str.isspace(), whose set differs from JS `\s`: it includes
 * \x1c-\x1f and \x85 and excludes \ufeff.
 */

/** The characters for which Python's str.isspace() is true (Unicode 15). */
const PY_WHITESPACE =
  '[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const PY_WHITESPACE_RUN = new RegExp(`${PY_WHITESPACE}+`);
const PY_STRIP = new RegExp(`^${PY_WHITESPACE}+|${PY_WHITESPACE}+$`, 'g');

/** Python's str.split() with no argument: runs of whitespace separate, no empty strings. */
export function pySplit(text: string): string[] {
  return text.split(PY_WHITESPACE_RUN).filter((w) => w.length > 0);
}

/** Python's str.strip() with no argument. */
export function pyStrip(text: string): string {
  return text.replace(PY_STRIP, '');
}
