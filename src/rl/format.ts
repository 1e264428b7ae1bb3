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

type Block = 'think' | 'search' | 'information' | 'answer';
const TAG = /<(\/?)(think|search|information|answer)>/g;

/** The paper's tool-call limit, the default of the format check. */
export const DEFAULT_MAX_TOOL_CALLS = 6;

export interface FormatOptions {
  /** Searches the with-tool grammar accepts (the paper: 6). */
  maxToolCalls: number;
  /** Check a prefix of a response still being generated. */
  partial?: boolean;
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
  // between: outside any block; inside: in an open block; afterSearch: waiting for <information>.
  let state: 'between' | 'inside' | 'afterSearch' | 'done' = 'between';
  let open: Block = 'think';
  let contentStart = 0;
  let searches = 0;
  let pos = 0;
  for (const m of text.matchAll(TAG)) {
    const gap = text.slice(pos, m.index);
    const closing = m[1] === '/';
    const tag = m[2] as Block;
    pos = m.index + m[0].length;
    if (state === 'inside') {
      if (!closing || tag !== open) return fail(closing ? 'unexpected-closing-tag' : 'nested-tag');
      if (open === 'search' && pyStrip(text.slice(contentStart, m.index)) === '') return fail('empty-search');
      state = open === 'search' ? 'afterSearch' : open === 'answer' ? 'done' : 'between';
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
    if (tag === 'search') {
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

/** The action that ends one generation turn. */
export type TurnAction =
  | { kind: 'search'; query: string }
  | { kind: 'answer'; answer: string }
  /** The turn ended without a closing stop tag (EOS or the length limit). */
  | { kind: 'none' };

/**
 * Reads the action a turn ended with. The policy stops at `</search>`, `</answer>`, EOS or the
 * length limit, so the action is decided by how the turn's text ends; whether the whole response is
 * still well-formed is `checkFormat(…, { partial: true })`'s job.
 */
export function parseTurn(turnText: string): TurnAction {
  const t = pyStrip(turnText);
  if (t.endsWith('</search>')) {
    const open = t.lastIndexOf('<search>');
    return {
      kind: 'search',
      query: open < 0 ? '' : pyStrip(t.slice(open + '<search>'.length, -'</search>'.length)),
    };
  }
  if (t.endsWith('</answer>')) {
    const open = t.lastIndexOf('<answer>');
    return {
      kind: 'answer',
      answer: open < 0 ? '' : pyStrip(t.slice(open + '<answer>'.length, -'</answer>'.length)),
    };
  }
  return { kind: 'none' };
}
