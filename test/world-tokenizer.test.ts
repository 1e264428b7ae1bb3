import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { formatObservation } from '../src/retrieval/observation.js';
import { INSTRUCTIONS, promptIds, promptText } from '../src/text/prompts.js';
import {
  FIXED_TOKENS,
  pieces,
  TAGS,
  TokenizerFileError,
  WorldTokenizer,
} from '../src/text/word-tokenizer.js';
import { TINY_WORLD } from '../src/world/config.js';
import { generateWorld } from '../src/world/generate.js';
import { demoTexts } from '../src/world/pretrain-data.js';

const world = generateWorld({ ...TINY_WORLD, seed: 5 });
const tok = world.tokenizer;

t.test('every world text round-trips exactly and has no unknown word', async (t) => {
  const texts = [
    ...world.passages.map((p) => p.contents.replace('\n', ' ')),
    ...world.questions.flatMap((q) => [q.question, ...q.golden_answers]),
    ...demoTexts(world.demos),
  ];
  let bad = 0;
  for (const text of texts) {
    const ids = tok.encode(text);
    if (tok.decode(ids) !== text || ids.includes(tok.unk)) bad++;
  }
  t.equal(bad, 0, `${texts.length} texts`);
});

t.test(
  'an observation splits into header pieces and decodes to the same text, whitespace normalised',
  async (t) => {
    const obs = formatObservation(world.passages.slice(0, 3));
    t.match(obs, /^Doc 1\(Title: [^)]+\) /);
    const ids = tok.encode(obs);
    t.equal(tok.decode(ids), obs.trim().replace(/\s+/g, ' '));
    t.same(pieces('Doc 1(Title: Ann Lee) Ann Lee was born in Vemar.'), [
      'Doc',
      '1',
      '(Title:',
      'Ann',
      'Lee',
      ')',
      'Ann',
      'Lee',
      'was',
      'born',
      'in',
      'Vemar',
      '.',
    ]);
    t.same(
      pieces('<answer>Vemar</answer>'),
      ['<answer>', 'Vemar', '</answer>'],
      'tags split off even without spaces',
    );
  },
);

t.test('control tokens and tags have fixed ids and are single tokens', async (t) => {
  t.same(tok.vocab.slice(0, FIXED_TOKENS.length), FIXED_TOKENS);
  t.same([tok.pad, tok.bos, tok.eos, tok.unk], [0, 1, 2, 3]);
  for (const tag of TAGS) t.same(tok.encode(tag), [tok.tag[tag]], tag);
  t.same(tok.encode('Zzyzx'), [tok.unk], 'an unknown word is <unk>');
  t.equal(
    tok.decode([tok.bos, tok.tag['<think>'], tok.eos]),
    '<think>',
    'control tokens are dropped when decoding',
  );
  t.equal(tok.decode([tok.bos, tok.eos], { keepControl: true }), '<bos> <eos>');
});

t.test(
  'tokenizer.json is a Hugging Face WordLevel tokenizer and loads back to the same vocabulary',
  async (t) => {
    const hf = tok.toHuggingFace();
    t.equal(hf.model.type, 'WordLevel');
    t.equal(hf.model.unk_token, '<unk>');
    t.same(
      Object.values(hf.model.vocab).sort((a, b) => a - b),
      [...Array(tok.size).keys()],
      'ids are 0..V-1',
    );
    t.same(
      hf.added_tokens.map((a) => [a.content, a.id, a.special]),
      FIXED_TOKENS.map((c, i) => [c, i, i < 4]),
      'controls are special; tags are added tokens that decode as text',
    );
    const dir = mkdtempSync(join(tmpdir(), 'akbe-tok-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    await tok.save(join(dir, 'tokenizer.json'));
    const back = await WorldTokenizer.load(join(dir, 'tokenizer.json'));
    t.same(back.vocab, tok.vocab);
    writeFileSync(join(dir, 'bad.json'), '{"model":{"type":"BPE"}}');
    await t.rejects(WorldTokenizer.load(join(dir, 'bad.json')), TokenizerFileError);
    await t.rejects(WorldTokenizer.load(join(dir, 'bad.json')), { message: /bad\.json: no WordLevel model/ });
    await t.rejects(WorldTokenizer.load(join(dir, 'missing.json')), {
      name: 'TokenizerFileError',
      message: /missing\.json: cannot be read/,
    });
  },
);

t.test('the two prompt paths end in different instructions that share no word', async (t) => {
  const q = world.questions[0].question;
  const wt = promptIds(tok, 'with-tool', q);
  const nt = promptIds(tok, 'no-tool', q);
  t.equal(wt[0], tok.bos);
  t.not(wt[wt.length - 2], nt[nt.length - 2], 'the last instruction word differs');
  const a = new Set(pieces(INSTRUCTIONS['with-tool']).filter((p) => p !== '.'));
  t.notOk(
    pieces(INSTRUCTIONS['no-tool']).some((p) => a.has(p)),
    'no shared word',
  );
  t.ok(
    promptText('with-tool', q).startsWith(q) && promptText('no-tool', q).startsWith(q),
    'both start with the question',
  );
  t.match(INSTRUCTIONS['with-tool'], /6/, 'the with-tool prompt states the search limit');
  t.ok(wt.length <= 20, `prompts are short (${wt.length} tokens)`);
});
