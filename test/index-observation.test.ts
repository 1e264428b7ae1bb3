import t from 'tap';
import { formatObservation } from '../src/retrieval/observation.js';

const docs = [
  { contents: 'Paris\nParis is the capital and largest city of France.' },
  { contents: 'Lyon\nLyon is a city in France.' },
];

t.test('formats passages as Search-R1 does: Doc i(Title: t) text, one per line', async (t) => {
  t.equal(
    formatObservation(docs),
    'Doc 1(Title: Paris) Paris is the capital and largest city of France.\nDoc 2(Title: Lyon) Lyon is a city in France.\n',
  );
  t.equal(formatObservation([]), '');
  t.equal(formatObservation([{ contents: 'Title only' }]), 'Doc 1(Title: Title only) \n');
});

t.test('each document gets an equal share of maxChars, cut at a word boundary', async (t) => {
  const long = [{ contents: `Long\n${'word '.repeat(200)}` }, { contents: 'Short\nA short one.' }];
  const out = formatObservation(long, { maxChars: 120 });
  t.ok(out.length <= 120, `length ${out.length}`);
  const [first, second] = out.split('\n');
  t.match(first, /^Doc 1\(Title: Long\) (word )*word\.\.\.$/);
  t.equal(second, 'Doc 2(Title: Short) A short one.', 'a long first passage does not crowd out the second');
});

t.test('cut rules, counted by hand (head "Doc 1(Title: T) " is 16 characters)', async (t) => {
  const one = (text: string, maxChars?: number) =>
    formatObservation([{ contents: `T\n${text}` }], { maxChars });
  t.equal(one('abc', 20), 'Doc 1(Title: T) abc\n', 'exactly its share (20): whole');
  t.equal(one('abcd', 20), 'Doc 1(Title: T) ...\n', 'one over with no room for text: the head and ...');
  t.equal(one('abc', 19), 'Doc 1(Title: T) ...', 'a share shorter than head + ...: cut to the share');
  t.equal(one('abcdef', 21), 'Doc 1(Title: T) a...\n', 'room 1: one character');
  // room 6: the text is cut at its last space only when that space is past half the room.
  t.equal(one('abcd efghij', 26), 'Doc 1(Title: T) abcd...\n');
  t.equal(
    one('abc defghij', 26),
    'Doc 1(Title: T) abc de...\n',
    'a space at exactly half the room is not used',
  );
  t.equal(one('ab cdefghij', 26), 'Doc 1(Title: T) ab cde...\n');
  t.equal(one('  a\t\tb \n c  '), 'Doc 1(Title: T) a b c\n', 'whitespace runs become one space, trimmed');
  const big = one('x'.repeat(2000));
  t.equal(big.length, 1500, 'the default cap is 1500 characters, filled');
  t.equal(big, `Doc 1(Title: T) ${'x'.repeat(1480)}...\n`);
  // Three documents share 100 characters: floor(100 / 3) = 33 each.
  const three = formatObservation(
    ['A', 'B', 'C'].map((title) => ({ contents: `${title}\n${'y'.repeat(40)}` })),
    { maxChars: 100 },
  );
  t.same(
    three.split('\n').slice(0, 3),
    ['A', 'B', 'C'].map((title, i) => `Doc ${i + 1}(Title: ${title}) ${'y'.repeat(13)}...`),
  );
});
