import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { VocabFormatError, WordPieceTokenizer } from '../src/retrieval/wordpiece.js';
import { tmpDir } from './fixtures/index/tmp-corpus.js';

const VOCAB = [
  '[PAD]',
  '[UNK]',
  '[CLS]',
  '[SEP]',
  'want',
  '##want',
  '##ed',
  'wa',
  'un',
  'runn',
  '##ing',
  ',',
  'low',
  'lowest',
  'hello',
  '!',
  'how',
  'are',
  'you',
  '?',
  '博',
  '推',
];
const tok = () => WordPieceTokenizer.fromText(`${VOCAB.join('\n')}\n`);
const pieces = (w: WordPieceTokenizer, text: string, max = 256) =>
  w.encode(text, max).ids.map((id) => VOCAB[id]);

t.test(
  'basic tokenization lowercases, strips accents, splits punctuation and CJK, drops control chars',
  async (t) => {
    const w = tok();
    t.same(w.basicTokens(' \tHeLLo!how  \n Are yoU?  '), ['hello', '!', 'how', 'are', 'you', '?']);
    t.same(w.basicTokens('Héllo Ünïcode'), ['hello', 'unicode']);
    t.same(w.basicTokens('ah博推zz'), ['ah', '博', '推', 'zz']);
    t.same(w.basicTokens('a\u0000b\u200bc\ufffd d'), ['abc', 'd']);
    t.same(
      w.basicTokens('$5 `x` ^y'),
      ['$', '5', '`', 'x', '`', '^', 'y'],
      'ASCII symbols count as punctuation',
    );
  },
);

t.test(
  'wordpiece is greedy longest-match-first with ## continuations and [UNK] for unsegmentable words',
  async (t) => {
    const w = tok();
    t.same(pieces(w, 'unwanted running'), ['[CLS]', 'un', '##want', '##ed', 'runn', '##ing', '[SEP]']);
    t.same(pieces(w, 'unwantedX running'), ['[CLS]', '[UNK]', 'runn', '##ing', '[SEP]']);
    t.same(pieces(w, 'lowest, low'), ['[CLS]', 'lowest', ',', 'low', '[SEP]']);
    t.same(pieces(w, ''), ['[CLS]', '[SEP]']);
    t.same(pieces(w, 'x'.repeat(101)), ['[CLS]', '[UNK]', '[SEP]'], 'words over 100 chars are [UNK]');
  },
);

t.test('encode truncates to maxLength including [CLS] and [SEP]', async (t) => {
  const w = tok();
  t.same(pieces(w, 'hello how are you', 5), ['[CLS]', 'hello', 'how', 'are', '[SEP]']);
  t.equal(w.encode('hello '.repeat(1000), 256).ids.length, 256);
});

t.test('loads a tokenizer.json WordPiece vocab; rejects other models and missing specials', async (t) => {
  const dir = tmpDir();
  const file = join(dir, 'tokenizer.json');
  writeFileSync(
    file,
    JSON.stringify({
      normalizer: { type: 'BertNormalizer', lowercase: true },
      model: { type: 'WordPiece', vocab: Object.fromEntries(VOCAB.map((v, i) => [v, i])) },
    }),
  );
  const w = await WordPieceTokenizer.fromFile(file);
  t.same(w.encode('Unwanted!').ids, [2, 8, 5, 6, 15, 3]);
  writeFileSync(file, JSON.stringify({ model: { type: 'BPE', vocab: {} } }));
  await t.rejects(WordPieceTokenizer.fromFile(file), VocabFormatError);
  t.throws(
    () => WordPieceTokenizer.fromText('a\nb\n', 'v.txt'),
    /v\.txt: WordPiece vocab lacks the special token \[CLS\]/,
  );
});
