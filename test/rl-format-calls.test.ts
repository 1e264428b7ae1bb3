/**
 * A turn that closes a tool call it never opened, and two tool-tag sets in one process: the
 * cases mutation testing found untested in src/rl/format.ts (parseTurn, toolCallChars, the
 * per-tag-set grammar cache).
 */
import t from 'tap';
import { checkFormat, parseTurn, toolCallChars } from '../src/rl/format.js';

t.test('a call closed without its opening tag has an empty query, wherever the text starts', async (t) => {
  t.strictSame(parseTurn('the answer</search>'), { kind: 'search', query: '' });
  t.strictSame(parseTurn('x </search>'), { kind: 'search', query: '' });
  // 'the answer' is 10 characters: the empty query sits at the closing tag, the call is the tag.
  t.strictSame(toolCallChars('the answer</search>'), { tag: 'search', query: [10, 10], call: [10, 19] });
  t.strictSame(toolCallChars(' <search> q </search> '), { tag: 'search', query: [10, 11], call: [1, 21] });
});

t.test('two tool-tag sets in one process: each keeps its own grammar', async (t) => {
  const text = '<think>x</think><lookup>q</lookup><information>o</information><answer>a</answer>';
  const ok = (toolTags: string[]) => checkFormat(text, 'with-tool', { maxToolCalls: 2, toolTags }).ok;
  t.equal(ok(['search']), false, 'lookup is no tool of the search-only grammar');
  t.equal(ok(['lookup']), true, 'and is one of the lookup grammar, asked after it');
  t.equal(ok(['search']), false, 'again');
});
