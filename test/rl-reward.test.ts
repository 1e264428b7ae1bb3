import t from 'tap';
import { checkFormat, parseTurn } from '../src/rl/format.js';
import { exactMatch, extractAnswer, normalizeAnswer, scoreTrajectory } from '../src/rl/reward.js';

// Expected values computed with Search-R1's normalize_answer under CPython 3 (lower -> remove_punc
// -> remove_articles -> white_space_fix).
const PYTHON_CASES: Array<[string, string]> = [
  ['The Home Rule League', 'home rule league'],
  ['54\u00a0Mbit/s', '54 mbits'],
  ['the theory of a thing', 'theory of thing'],
  ['Th\u00e9\u00e2tre the', 'th\u00e9\u00e2tre'],
  ['\u00e9the', '\u00e9the'],
  ['a_the', 'athe'],
  ['rock-and-roll', 'rockandroll'],
  ['\u001cfoo\u0085bar\ufeff', 'foo bar\ufeff'],
  ['\u03a9the', '\u03c9the'],
  ['the2 3 an', 'the2 3'],
  ['A. Lincoln', 'lincoln'],
  ["don't", 'dont'],
  ['\u039f\u0394\u039f\u03a3', '\u03bf\u03b4\u03bf\u03c2'],
  ['\u00bdthe \u00bd the', '\u00bdthe \u00bd'],
  ['the\u0301', '\u0301'],
  ['Rock\u2019n\u2019roll', 'rock\u2019n\u2019roll'],
  ['an\u3000apple\u2003a\u200bday', 'apple \u200bday'],
  ['  The  ', ''],
  ['aan a an the thee', 'aan thee'],
  ['\u0130stanbul', 'i\u0307stanbul'],
  ['\u00c0N', '\u00e0n'],
  ['the_end', 'theend'],
  ['\u00fcber the a-team', '\u00fcber ateam'],
  ['\u00a0\u2028the\u2029\t', ''],
  ['a\u180ez', '\u180ez'],
  ['The Lord of the Rings: The Return of the King', 'lord of rings return of king'],
  ['\u01c5the', '\u01c6the'],
  ['\u216bThe', '\u217bthe'],
  ['the\u0663', 'the\u0663'],
  ['', ''],
];

t.test(
  'normalizeAnswer matches CPython on punctuation, articles, Unicode words and whitespace',
  async (t) => {
    // Messages escape non-ASCII: a raw U+2028 in the TAP stream would split the line.
    const ascii = (s: string) =>
      JSON.stringify(s).replace(
        /[^\x20-\x7e]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
      );
    for (const [input, expected] of PYTHON_CASES) t.equal(normalizeAnswer(input), expected, ascii(input));
  },
);

t.test('exactMatch against one gold or any of a list (answers from the QA files)', async (t) => {
  t.equal(exactMatch('home rule league', 'The Home Rule League'), 1); // hotpotqa_500 idx 2
  t.equal(exactMatch('James Madison.', 'james madison'), 1); // bamboogle idx 1
  t.equal(exactMatch('54 Mbit/s', ['54\u00a0Mbit/s']), 1); // NQ: no-break space inside the gold
  t.equal(exactMatch('Moira Kelly', ['Niketa Calame', 'Sally Dworsky', 'Moira Kelly', 'Laura Williams']), 1);
  t.equal(exactMatch('Moira', ['Niketa Calame', 'Moira Kelly']), 0);
  t.equal(exactMatch('impalas', 'The Impalas'), 1);
  t.equal(exactMatch('theory', 'the ory'), 0); // "the" inside a word is not an article
  t.equal(exactMatch('anything', []), 0);
});

t.test('extractAnswer takes the last answer block, stripped, across newlines', async (t) => {
  t.equal(extractAnswer('<answer> a </answer> x <answer>\n Paris\n</answer>'), 'Paris');
  t.equal(extractAnswer('<answer>one</answer>'), 'one');
  t.equal(extractAnswer('<answer></answer>'), '');
  t.equal(extractAnswer('<answer>open but never closed'), null);
  t.equal(extractAnswer('no tags'), null);
});

const WT = 'with-tool' as const;
const NT = 'no-tool' as const;
const LIM = { maxToolCalls: 2 };
const search = (q: string) => `<search> ${q} </search> <information> Doc 1(Title: x) y </information>`;

t.test('checkFormat accepts the agreed grammar on both paths', async (t) => {
  t.same(
    checkFormat(
      `<think> a </think> ${search('q1')} <think> b </think> ${search('q2')} <answer> X </answer>`,
      WT,
      LIM,
    ),
    { ok: true, reason: 'ok' },
  );
  t.same(checkFormat('<answer>X</answer>', WT, LIM), { ok: true, reason: 'ok' });
  t.same(checkFormat('<think> a </think> <answer> X </answer>\n', NT, LIM), { ok: true, reason: 'ok' });
});

t.test('checkFormat defaults to the paper limit of 6 searches', async (t) => {
  t.ok(checkFormat(`${search('a').repeat(6)} <answer> X </answer>`, WT).ok);
  t.same(checkFormat(`${search('a').repeat(7)} <answer> X </answer>`, WT), {
    ok: false,
    reason: 'too-many-searches',
  });
});

t.test('checkFormat names each violation', async (t) => {
  const cases: Array<[string, 'with-tool' | 'no-tool', string]> = [
    ['<think> a </think>', WT, 'no-answer'],
    ['<think> a </think> <answer> X', WT, 'unclosed-block'],
    ['hello <answer> X </answer>', WT, 'text-outside-blocks'],
    ['<think> a <search> q </search> </think> <answer> X </answer>', WT, 'nested-tag'],
    ['</think> <answer> X </answer>', WT, 'unexpected-closing-tag'],
    [`${search('q')} <answer> X </answer>`, NT, 'search-in-no-tool'],
    [`${search('a')} ${search('b')} ${search('c')} <answer> X </answer>`, WT, 'too-many-searches'],
    ['<search>  </search> <information> i </information> <answer> X </answer>', WT, 'empty-search'],
    ['<search> q </search> <answer> X </answer>', WT, 'missing-information'],
    ['<search> q </search>', WT, 'missing-information'],
    ['<information> made up </information> <answer> X </answer>', WT, 'unexpected-information'],
    ['<answer> X </answer> <answer> Y </answer>', WT, 'content-after-answer'],
    ['<answer> X </answer> trailing', NT, 'content-after-answer'],
  ];
  for (const [text, path, reason] of cases) t.same(checkFormat(text, path, LIM), { ok: false, reason }, text);
});

t.test('checkFormat on segments rejects an information block the policy wrote itself', async (t) => {
  const ok = [
    { kind: 'generated' as const, text: '<search> q </search>' },
    { kind: 'observation' as const, text: '<information> i </information>' },
    { kind: 'generated' as const, text: '<answer> X </answer>' },
  ];
  t.same(checkFormat(ok, WT, LIM), { ok: true, reason: 'ok' });
  const forged = [
    {
      kind: 'generated' as const,
      text: '<search> q </search> <information> i </information> <answer> X </answer>',
    },
  ];
  t.same(checkFormat(forged, WT, LIM), { ok: false, reason: 'generated-information' });
});

t.test('a partial check accepts a prefix waiting for its observation or still inside a block', async (t) => {
  t.ok(checkFormat('<think> a </think> <search> q </search>', WT, { ...LIM, partial: true }).ok);
  t.ok(checkFormat('<think> still thinking', WT, { ...LIM, partial: true }).ok);
  t.notOk(checkFormat('oops <search> q </search>', WT, { ...LIM, partial: true }).ok);
  t.notOk(checkFormat('<search> q </search>', NT, { ...LIM, partial: true }).ok);
});

t.test('parseTurn reads the action a turn ends with', async (t) => {
  t.same(parseTurn('<think> a </think> <search> who founded x </search>'), {
    kind: 'search',
    query: 'who founded x',
  });
  t.same(parseTurn('<think> a </think> <answer> Seth Klarman </answer> '), {
    kind: 'answer',
    answer: 'Seth Klarman',
  });
  t.same(parseTurn('<think> a </think> and then'), { kind: 'none' });
});

t.test('scoreTrajectory: EM when the format holds, 0 otherwise', async (t) => {
  const good = `<think> t </think> ${search('home rule')} <answer> the Home Rule League </answer>`;
  t.same(scoreTrajectory(good, WT, ['The Home Rule League'], LIM), {
    reward: 1,
    em: 1,
    formatOk: true,
    formatReason: 'ok',
    answer: 'the Home Rule League',
  });
  t.equal(scoreTrajectory(good, WT, ['Sinn Fein'], LIM).reward, 0);
  const bad = scoreTrajectory(
    `${search('q')} <answer> the Home Rule League </answer>`,
    NT,
    'The Home Rule League',
    LIM,
  );
  t.same([bad.reward, bad.em, bad.formatOk, bad.formatReason], [0, 0, false, 'search-in-no-tool']);
});

t.test('every character of Python string.punctuation is removed, and nothing else in ASCII', async (t) => {
  let printable = '';
  for (let c = 0x21; c < 0x7f; c++) printable += String.fromCharCode(c);
  // By hand: the 94 printable ASCII characters less the 32 of string.punctuation, lower-cased.
  t.equal(normalizeAnswer(printable), '0123456789abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz');
  t.equal(normalizeAnswer('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'), '', 'string.punctuation alone');
});
