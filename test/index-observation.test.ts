import t from 'tap';
import { formatObservation } from '../src/index/observation.js';

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
