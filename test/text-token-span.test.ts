/**
 * A search decision's span (issue 10: beta-GRPO gates on the paper's span, Wu et al. 2025 §4):
 * the query's characters in a turn's raw text (src/rl/format.ts toolCallChars), then the turn's
 * tokens that spell them (src/text/token-span.ts) with the world's word-level tokenizer, where
 * every tag is one token, and Qwen3's byte-level BPE, where `<search>` is three tokens and an
 * emoji's bytes are split across tokens. Every span is worked out by hand from the token pieces.
 */
import t from 'tap';
import { parseTurn, toolCallChars } from '../src/rl/format.js';
import { hfCodec } from '../src/text/codec.js';
import { searchR1Environment, worldEnvironment } from '../src/text/environment.js';
import { tokensOfChars, toolCallTokenSpan } from '../src/text/token-span.js';
import { WorldTokenizer } from '../src/text/word-tokenizer.js';
import { qwen3Tokenizer } from './helpers/hf-files.js';

t.test('toolCallChars: the stripped query and the call, in raw-text offsets', async (t) => {
  //            0       8 9    14 15      24
  const plain = '<search> Paris </search>';
  t.strictSame(toolCallChars(plain), { tag: 'search', query: [9, 14], call: [0, 24] });
  // Leading and trailing whitespace of the turn (2 spaces before, ' \n' after) shift nothing but the origin.
  //           2                 20 21      30 33 34       43
  const padded = '  <think> a </think> <search> b c </search> \n';
  t.strictSame(toolCallChars(padded), { tag: 'search', query: [30, 33], call: [21, 43] });
  // Several <search> blocks in one turn: the call is the last one (parseTurn's rule).
  //               0          11 21        30 32 33     42
  const several = '<search> a </search> <search> bb </search>';
  t.strictSame(toolCallChars(several), { tag: 'search', query: [30, 32], call: [21, 42] });
  // An unclosed <search> before the last opening tag: the query starts after the last one.
  t.strictSame(toolCallChars('<search> x <search> y </search>'), {
    tag: 'search',
    query: [20, 21],
    call: [11, 31],
  });
  // Empty queries: an empty range at the closing tag; the call range still holds the tags.
  t.strictSame(toolCallChars('<search>   </search>'), { tag: 'search', query: [11, 11], call: [0, 20] });
  t.strictSame(toolCallChars('<search></search>'), { tag: 'search', query: [8, 8], call: [0, 17] });
  t.strictSame(
    toolCallChars(' </search>'),
    { tag: 'search', query: [1, 1], call: [1, 10] },
    'no opening tag',
  );
  // Python's whitespace inside the query (\u00a0 is whitespace to str.strip, and so stripped).
  t.strictSame(toolCallChars('<search>\u00a0q\u00a0</search>')?.query, [9, 10]);
  // A custom tool's tag.
  t.strictSame(toolCallChars('<calc> 1 + 2 </calc>', ['search', 'calc']), {
    tag: 'calc',
    query: [7, 12],
    call: [0, 20],
  });
  // Not a tool call.
  for (const text of [
    '<answer> x </answer>',
    '<think> a </think>',
    '',
    '   ',
    '<search> a',
    '<search> a </search> trailing',
    '<calc> 1 </calc>',
  ])
    t.equal(toolCallChars(text), null, JSON.stringify(text));
  // The characters are exactly parseTurn's query, for every call above.
  for (const text of [
    plain,
    padded,
    several,
    '<search> x <search> y </search>',
    '<search>\u00a0q\u00a0</search>',
  ]) {
    const c = toolCallChars(text)!;
    t.equal(text.slice(c.query[0], c.query[1]), (parseTurn(text) as { query: string }).query);
  }
});

t.test("the world's tokenizer: every tag one token, a later turn read after a space", async (t) => {
  const tok = await WorldTokenizer.load('assets/base/tokenizer.json');
  const env = worldEnvironment(tok);
  // 0 <think>  1 Bank  2 Bridge  3 </think>  4 <search>  5 Crown  6 Bank  7 ?  8 </search>
  const ids = tok.encode('<think> Bank Bridge </think> <search> Crown Bank ? </search>');
  t.equal(ids.length, 9);
  t.equal(ids[7], tok.encode('?')[0]);
  for (const turn of [0, 1]) {
    const prefix = (k: number) => env.turnText(ids.slice(0, k), turn);
    t.equal(prefix(9).startsWith(' '), turn > 0, `turn ${turn}: ${JSON.stringify(prefix(9))}`);
    t.strictSame(
      toolCallTokenSpan(ids.length, prefix),
      [5, 8],
      `turn ${turn}: Crown Bank ? (the glued ? too)`,
    );
  }
  // An empty query takes the call's own tokens: <search> </search>.
  const empty = tok.encode('<think> Bank </think> <search> </search>');
  t.strictSame(
    toolCallTokenSpan(empty.length, (k) => env.turnText(empty.slice(0, k), 1)),
    [3, 5],
  );
  const answer = tok.encode('<answer> Bank </answer>');
  t.equal(
    toolCallTokenSpan(answer.length, (k) => env.turnText(answer.slice(0, k), 0)),
    null,
  );
});

t.test("Qwen3's byte-level BPE: tags of several tokens, a character split across tokens", async (t) => {
  const tok = await qwen3Tokenizer();
  const env = searchR1Environment(tok, hfCodec(tok));
  const spanOf = (text: string) => {
    const ids = env.encode(text);
    return { ids, span: toolCallTokenSpan(ids.length, (k) => env.turnText(ids.slice(0, k), 0)) };
  };
  const pieces = env.codec.pieces();
  // <think> ' not' ' sure' ' ' </think> '\n' '<' 'search' '>' ' author' ' of' ' Ham' 'let' ' </' 'search' '>'
  const a = spanOf('<think> not sure </think>\n<search> author of Hamlet </search>');
  t.strictSame(
    a.ids.slice(6, 9).map((i) => pieces[i]),
    ['<', 'search', '>'],
    '<search> is three tokens',
  );
  t.strictSame(a.span, [9, 13], "' author' ' of' ' Ham' 'let'");
  // '<' 'search' '>' 'Paris' '</' 'search' '>': the query is one token.
  t.strictSame(spanOf('<search>Paris</search>').span, [3, 4]);
  // '<' 'search' '>' ' \xF0\x9F' '\xA6' '\x9C' ' par' 'rot' ' </' 'search' '>': the parrot's
  // bytes are three tokens; the two prefixes that end inside it decode to U+FFFD and bound nothing.
  const parrot = spanOf('<search> 🦜 parrot </search>');
  t.equal(env.turnText(parrot.ids.slice(0, 4), 0), '<search> \ufffd', 'a prefix ending inside the emoji');
  t.strictSame(parrot.span, [3, 8], 'the three byte tokens and the two word tokens');
  // An empty query: '<' 'search' '></' 'search' '>' -- the call's tokens, the merged '></' included.
  const empty = spanOf('<search></search>');
  t.strictSame(
    empty.ids.map((i) => pieces[i]),
    ['<', 'search', '></', 'search', '>'],
  );
  t.strictSame(empty.span, [0, 5]);
});

t.test('tokensOfChars: decoders that rewrite or over-report a prefix bound nothing', async (t) => {
  // Tokens spell 'ab', 'c', then the bytes of 'é' (2 tokens), then 'de': text 'abcéde'.
  const pieces = ['ab', 'c', '', 'é', 'de'];
  // A decoder that writes one U+FFFD per dangling byte, so a partial prefix is LONGER than the text it stands for.
  const prefix = (k: number) => pieces.slice(0, k).join('') + (k === 3 ? '\ufffd\ufffd' : '');
  t.equal(prefix(3).length, 5, 'the partial prefix reports 5 characters; only 3 are real');
  t.strictSame(tokensOfChars(5, prefix, [3, 4]), [2, 4], "'é': both of its byte tokens");
  t.strictSame(
    tokensOfChars(5, prefix, [4, 6]),
    [4, 5],
    "'de' only: the partial prefix's length is not its end",
  );
  t.strictSame(tokensOfChars(5, prefix, [2, 3]), [1, 2], "'c'");
  t.strictSame(tokensOfChars(5, prefix, [1, 4]), [0, 4], "'bcé': a token straddling the start counts");
  // A decoder clean-up that changes earlier text once later tokens arrive ('a ,' -> 'a,').
  const cleaned = ['a', ' ,', ' b'];
  const tidy = (k: number) => {
    const s = cleaned.slice(0, k).join('');
    return k >= 3 ? s.replace(' ,', ',') : s;
  };
  t.equal(tidy(3), 'a, b');
  // 'b': the rewritten prefix 'a ,' is no bound, so the span reaches back to the clean 'a'.
  t.strictSame(tokensOfChars(3, tidy, [3, 4]), [1, 3]);
  t.throws(() => tokensOfChars(3, tidy, [2, 2]), { name: 'RangeError' }, 'an empty range has no tokens');
  t.throws(() => tokensOfChars(3, tidy, [2, 5]), { name: 'RangeError' }, 'past the text');
});
