/**
 * The tag grammar of a response (agreed with the world's tokenizer, where every tag is one token):
 *
 *   with-tool:  ( <think> … </think> | <search> q </search> <information> … </information> )*
 *               <answer> x </answer>
 *   no-tool:    ( <think> … </think> )* <answer> x </answer>
 *
 * Only whitespace may stand between blocks, blocks do not nest, the `<information>` block after
 * each search is inserted by the environment (a self-written one is a format failure), at most
 * `maxToolCalls` searches, exactly one answer and nothing after it. A search on the no-tool path is
 * a format failure. `partial: true` checks a prefix (a rollout in progress): it may stop after a
 * closed block or right after `</search>`, waiting for the observation.
 *
 * `<search>` stands for any tool's tag: the grammar knows tools only by their tags
 * (`toolTags`, default: the paper's one tool), and is the same for each. The failure codes keep
 * the paper's word ("search") for a tool call.
 */
import { pyStrip } from './pytext.js';
import type { RolloutPath, TextSegment } from './types.js';

export type FormatReason =
  | 'ok'
  | 'no-answer'
  | 'unclosed-block'
  | 'text-outside-blocks'
  | 'nested-tag'
  | 'unexpected-closing-tag'
  | 'search-in-no-tool'
  | 'too-many-searches'
  | 'empty-search'
  | 'missing-information'
  | 'unexpected-information'
  | 'generated-information'
  | 'content-after-answer';

export interface FormatCheck {
  ok: boolean;
  reason: FormatReason;
}

/** The tags of the tools a response may call when none are given: the paper's search. */
export const DEFAULT_TOOL_TAGS: readonly string[] = ['search'];

/** The tag regex for a set of tool tags (tags are plain words: letters, digits, '_' and '-'). */
const tagPatterns = new Map<string, RegExp>();
function tagPattern(toolTags: readonly string[]): RegExp {
  const key = toolTags.join('|');
  let re = tagPatterns.get(key);
  if (!re) {
    for (const t of toolTags)
      if (!/^[A-Za-z][\w-]*$/.test(t) || ['think', 'information', 'answer'].includes(t))
        throw new RangeError(`tool tag '${t}' must be a word other than think, information and answer`);
    re = new RegExp(`<(\\/?)(think|information|answer|${toolTags.join('|')})>`, 'g');
    tagPatterns.set(key, re);
  }
  return re;
}

/** The paper's tool-call limit, the default of the format check. */
export const DEFAULT_MAX_TOOL_CALLS = 6;

export interface FormatOptions {
  /** Searches the with-tool grammar accepts (the paper: 6). */
  maxToolCalls: number;
  /** Check a prefix of a response still being generated. */
  partial?: boolean;
  /** Tags of the tools the with-tool path may call (default DEFAULT_TOOL_TAGS). */
  toolTags?: readonly string[];
}

/**
 * Checks a response against the tag grammar. Given segments, it also checks that every
 * `<information>` tag came from the environment (an observation segment), not from the policy.
 */
export function checkFormat(
  response: string | readonly TextSegment[],
  path: RolloutPath,
  opts: FormatOptions = { maxToolCalls: DEFAULT_MAX_TOOL_CALLS },
): FormatCheck {
  if (typeof response !== 'string') {
    for (const seg of response) {
      if (seg.kind === 'generated' && /<\/?information>/.test(seg.text)) return fail('generated-information');
    }
  }
  const text = typeof response === 'string' ? response : response.map((s) => s.text).join('');
  const toolTags = opts.toolTags ?? DEFAULT_TOOL_TAGS;
  const isTool = (tag: string) => toolTags.includes(tag);
  // between: outside any block; inside: in an open block; afterSearch: waiting for <information>.
  let state: 'between' | 'inside' | 'afterSearch' | 'done' = 'between';
  let open = 'think';
  let contentStart = 0;
  let searches = 0;
  let pos = 0;
  for (const m of text.matchAll(tagPattern(toolTags))) {
    const gap = text.slice(pos, m.index);
    const closing = m[1] === '/';
    const tag = m[2];
    pos = m.index + m[0].length;
    if (state === 'inside') {
      if (!closing || tag !== open) return fail(closing ? 'unexpected-closing-tag' : 'nested-tag');
      if (isTool(open) && pyStrip(text.slice(contentStart, m.index)) === '') return fail('empty-search');
      state = isTool(open) ? 'afterSearch' : open === 'answer' ? 'done' : 'between';
      continue;
    }
    if (pyStrip(gap) !== '') {
      if (state === 'done') return fail('content-after-answer');
      if (state === 'afterSearch') return fail('missing-information');
      return fail('text-outside-blocks');
    }
    if (state === 'done') return fail('content-after-answer');
    if (closing) return fail(state === 'afterSearch' ? 'missing-information' : 'unexpected-closing-tag');
    if (state === 'afterSearch' && tag !== 'information') return fail('missing-information');
    if (state === 'between' && tag === 'information') return fail('unexpected-information');
    if (isTool(tag)) {
      if (path === 'no-tool') return fail('search-in-no-tool');
      searches += 1;
      if (searches > opts.maxToolCalls) return fail('too-many-searches');
    }
    state = 'inside';
    open = tag;
    contentStart = pos;
  }
  const tail = text.slice(pos);
  if (state === 'inside') return opts.partial ? OK : fail('unclosed-block');
  if (pyStrip(tail) !== '') {
    if (state === 'done') return fail('content-after-answer');
    return fail(state === 'afterSearch' ? 'missing-information' : 'text-outside-blocks');
  }
  if (state === 'done' || opts.partial) return OK;
  return fail(state === 'afterSearch' ? 'missing-information' : 'no-answer');
}

const OK: FormatCheck = { ok: true, reason: 'ok' };
function fail(reason: FormatReason): FormatCheck {
  return { ok: false, reason };
}

/** A call of the tool whose tag is `kind` (the search tool's: `{ kind: 'search', query }`). */
export interface ToolCallAction {
  kind: string;
  /** The argument text between the tags, stripped. */
  query: string;
}

/** The action that ends one generation turn. */
export type TurnAction =
  | ToolCallAction
  | { kind: 'answer'; answer: string }
  /** The turn ended without a closing stop tag (EOS or the length limit). */
  | { kind: 'none' };

export function isToolCall(a: TurnAction): a is ToolCallAction {
  return 'query' in a;
}

/** The inner text of a turn that ends with `</tag>` (from its last `<tag>`), stripped. */
function closedBlock(t: string, tag: string): string | null {
  const close = `</${tag}>`;
  if (!t.endsWith(close)) return null;
  const open = t.lastIndexOf(`<${tag}>`);
  return open < 0 ? '' : pyStrip(t.slice(open + tag.length + 2, -close.length));
}

/** A half-open character range [start, end) of a text. */
export type CharRange = readonly [start: number, end: number];

/** Where a turn's tool call sits in the turn's raw text. */
export interface ToolCallChars {
  /** The tool's tag. */
  tag: string;
  /** The argument between the tags, whitespace-stripped (what parseTurn's `query` reads); empty when the query is. */
  query: CharRange;
  /** The call itself, from its opening tag through its closing tag. */
  call: CharRange;
}

/**
 * The character ranges of the tool call a turn ends with, in the turn's RAW text (before any
 * stripping), by parseTurn's rule: the stripped text ends with `</tag>` for a tool tag, and the
 * call opens at the last `<tag>` before it. Null when the turn does not end in a tool call
 * (answer, none). A call without an opening tag reads as an empty query in parseTurn; here its
 * call range starts at the closing tag.
 */
export function toolCallChars(
  turnText: string,
  toolTags: readonly string[] = DEFAULT_TOOL_TAGS,
): ToolCallChars | null {
  const t = pyStrip(turnText);
  if (t === '') return null;
  // t starts with a non-whitespace character, so its first occurrence is after the leading whitespace.
  const lead = turnText.indexOf(t);
  for (const tag of toolTags) {
    const close = `</${tag}>`;
    if (!t.endsWith(close)) continue;
    const closeAt = t.length - close.length;
    const openAt = t.lastIndexOf(`<${tag}>`, closeAt);
    const innerAt = openAt < 0 ? closeAt : openAt + tag.length + 2;
    const inner = t.slice(innerAt, closeAt);
    const query = pyStrip(inner);
    // The stripped query starts with a non-whitespace character: its first occurrence is it.
    const qAt = query === '' ? closeAt : innerAt + inner.indexOf(query);
    return {
      tag,
      query: [lead + qAt, lead + qAt + query.length],
      call: [lead + (openAt < 0 ? closeAt : openAt), lead + t.length],
    };
  }
  return null;
}

/**
 * Reads the action a turn ended with. The policy stops at a tool's closing tag, `</answer>`, EOS
 * or the length limit, so the action is decided by how the turn's text ends; whether the whole
 * response is still well-formed is `checkFormat(…, { partial: true })`'s job.
 */
export function parseTurn(turnText: string, toolTags: readonly string[] = DEFAULT_TOOL_TAGS): TurnAction {
  const t = pyStrip(turnText);
  for (const tag of toolTags) {
    const query = closedBlock(t, tag);
    if (query !== null) return { kind: tag, query };
  }
  const answer = closedBlock(t, 'answer');
  if (answer !== null) return { kind: 'answer', answer };
  return { kind: 'none' };
}
