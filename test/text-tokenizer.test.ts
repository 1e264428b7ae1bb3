import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ChatTemplateError } from '../src/text/chat-template.js';
import { readCheckpointTokenizer } from '../src/text/codec.js';
import { HfTokenizer, HfTokenizerFileError } from '../src/text/hf-tokenizer.js';
import { tokenizerJsonText, WorldTokenizer } from '../src/text/word-tokenizer.js';
import { QWEN3_TOKENIZER_DIR, qwen3Tokenizer, readQa } from './helpers/hf-files.js';

t.test('Qwen3 tokenizer: known ids of plain text and of the chat specials', async (t) => {
  const tok = await qwen3Tokenizer();
  // Ids from Qwen's published vocabulary (the same in Qwen2 and Qwen3).
  t.same(tok.encode('Hello World'), [9707, 4337]);
  t.same(tok.encode('<|im_start|>user\nhi<|im_end|>'), [151644, 872, 198, 6023, 151645]);
  t.equal(tok.tokenToId('<|endoftext|>'), 151643);
  t.equal(tok.tokenToId('<think>'), 151667);
  t.equal(tok.idToToken(151668), '</think>');
  t.equal(tok.vocabSize, 151669, 'BPE vocabulary + 26 added tokens');
});

t.test('Qwen3 tokenizer: special tokens from tokenizer_config.json', async (t) => {
  const tok = await qwen3Tokenizer();
  t.equal(tok.eos, 151645, 'eos_token <|im_end|>');
  t.equal(tok.pad, 151643, 'pad_token <|endoftext|>');
  t.equal(tok.bos, undefined, 'Qwen has no BOS');
  t.same(tok.stopIds, [151645], 'no generation_config.json: the config EOS alone');
  t.ok(tok.isSpecial(151645), '<|im_end|> is special');
  t.notOk(tok.isSpecial(151667), "Qwen3's <think> is an added token but not special");
  const ids = tok.encode('<|im_start|>assistant\n<think>\nok\n</think>\n\nyes<|im_end|>');
  t.equal(tok.decode(ids, { skipSpecialTokens: true }), 'assistant\n<think>\nok\n</think>\n\nyes');
  t.equal(tok.decode(ids), '<|im_start|>assistant\n<think>\nok\n</think>\n\nyes<|im_end|>');
});

t.test('Qwen3 tokenizer: every QA sample question and answer round-trips', async (t) => {
  const tok = await qwen3Tokenizer();
  let n = 0;
  const bad: string[] = [];
  for (const file of ['NQ-open.dev.jsonl', 'bamboogle.jsonl', 'hotpotqa_500.jsonl']) {
    for (const row of readQa(file)) {
      for (const s of [row.question, ...[row.answer].flat()]) {
        n++;
        if (tok.decode(tok.encode(s)) !== s) bad.push(s);
      }
    }
  }
  t.ok(n > 8000, `${n} strings`);
  t.same(bad, [], 'decode(encode(s)) === s');
  // Multi-byte characters split across byte-level tokens still round-trip.
  for (const s of ['São Paulo – 日本語 🎉', '  two  spaces\n\nand newlines\t'])
    t.equal(tok.decode(tok.encode(s)), s);
});

t.test(
  'Qwen3 tokenizer: a stop string split across tokens is whole in the concatenated pieces',
  async (t) => {
    const tok = await qwen3Tokenizer();
    const ids = tok.encode(' <search> who </search>');
    t.ok(ids.length >= 6, 'the tags are several BPE tokens each');
    const pieces = tok.pieces();
    t.equal(pieces.length, tok.vocabSize);
    t.equal(ids.map((i) => pieces[i]).join(''), ' <search> who </search>');
    t.equal(pieces[151645], '<|im_end|>');
  },
);

const QWEN3_SYSTEM_USER =
  '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' +
  '<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n' +
  '<|im_start|>assistant\n';

t.test("Qwen3 chat template renders Qwen3's format exactly", async (t) => {
  const tok = await qwen3Tokenizer();
  const chat = [
    { role: 'system' as const, content: 'You are a helpful assistant.' },
    { role: 'user' as const, content: 'Who wrote Hamlet?' },
  ];
  t.equal(tok.renderChat(chat), QWEN3_SYSTEM_USER);
  t.equal(
    tok.renderChat(chat, { enableThinking: false }),
    `${QWEN3_SYSTEM_USER}<think>\n\n</think>\n\n`,
    'thinking off: an empty think block',
  );
  t.equal(
    tok.renderChat([{ role: 'user', content: 'Q' }], { addGenerationPrompt: false }),
    '<|im_start|>user\nQ<|im_end|>\n',
  );
  // An earlier assistant turn loses its reasoning; the last one (after the last query) keeps it.
  t.equal(
    tok.renderChat(
      [
        { role: 'user', content: 'A?' },
        { role: 'assistant', content: '<think>\nhmm\n</think>\n\nyes' },
        { role: 'user', content: 'B?' },
        { role: 'assistant', content: '<think>\nwell\n</think>\n\nno' },
      ],
      { addGenerationPrompt: false },
    ),
    '<|im_start|>user\nA?<|im_end|>\n<|im_start|>assistant\nyes<|im_end|>\n' +
      '<|im_start|>user\nB?<|im_end|>\n<|im_start|>assistant\n<think>\nwell\n</think>\n\nno<|im_end|>\n',
  );
  t.equal(
    tok.renderChat([
      { role: 'user', content: 'Q' },
      { role: 'assistant', content: 'call' },
      { role: 'tool', content: 'obs 1' },
      { role: 'tool', content: 'obs 2' },
    ]),
    '<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\ncall<|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\nobs 1\n</tool_response>\n<tool_response>\nobs 2\n</tool_response><|im_end|>\n' +
      '<|im_start|>assistant\n',
    'consecutive tool results share one user turn',
  );
  // The rendered prompt tokenizes with the specials as single ids.
  t.same(tok.encode(QWEN3_SYSTEM_USER).slice(0, 3), [151644, 8948, 198], '<|im_start|> system \\n');
  t.same(tok.encode(QWEN3_SYSTEM_USER).slice(-3), [151644, 77091, 198], '<|im_start|> assistant \\n');
});

t.test('chat messages are validated', async (t) => {
  const tok = await qwen3Tokenizer();
  t.throws(
    () => tok.renderChat([{ role: 'robot', content: 'x' } as never]),
    ChatTemplateError,
    'unknown role',
  );
  t.throws(() => tok.renderChat([{ role: 'user', content: 3 } as never]), /messages\[0\]/);
});

t.test('checkpoint directories: template file, generation config, errors naming the file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'akbe-hf-tok-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const tokenizerJson = JSON.stringify({
    version: '1.0',
    added_tokens: ['<s>', '</s>'].map((content, id) => ({ id, content, special: true })),
    normalizer: null,
    pre_tokenizer: { type: 'WhitespaceSplit' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab: { '<s>': 0, '</s>': 1, a: 2, b: 3 }, unk_token: 'b' },
  });
  await writeFile(join(dir, 'tokenizer.json'), tokenizerJson);
  await t.rejects(HfTokenizer.fromDir(dir), HfTokenizerFileError, 'no tokenizer_config.json');
  await t.rejects(HfTokenizer.fromDir(dir), /tokenizer_config\.json: cannot read it/);
  await writeFile(join(dir, 'tokenizer_config.json'), '{ not json');
  await t.rejects(HfTokenizer.fromDir(dir), /tokenizer_config\.json: not valid JSON/);
  await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<eot>' }));
  await t.rejects(HfTokenizer.fromDir(dir), /eos_token "<eot>" is not in tokenizer\.json's vocabulary/);
  await writeFile(
    join(dir, 'tokenizer_config.json'),
    JSON.stringify({ bos_token: { content: '<s>' }, eos_token: '</s>' }),
  );
  const plain = await HfTokenizer.fromDir(dir);
  t.equal(plain.bos, 0, 'an AddedToken object names the BOS');
  t.equal(plain.chatTemplate, null);
  t.throws(() => plain.renderChat([{ role: 'user', content: 'a' }]), /has no chat_template/);
  await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [1, 2] }));
  await writeFile(
    join(dir, 'chat_template.jinja'),
    '{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}',
  );
  const full = await HfTokenizer.fromDir(dir);
  t.same(full.stopIds, [1, 2], 'EOS plus generation_config eos ids, once each');
  t.equal(full.renderChat([{ role: 'user', content: 'a b' }]), '<s>[user] a b');
  t.same(full.encode('a b'), [2, 3]);
  // A process keeps parsed tokenizers by their files' bytes: a tokenizer.json changed in the same
  // directory is read anew, and the unchanged one is still what it was.
  await writeFile(join(dir, 'tokenizer.json'), tokenizerJson.replace('"a":2,"b":3', '"a":3,"b":2'));
  t.same((await HfTokenizer.fromDir(dir)).encode('a b'), [3, 2], 'the changed tokenizer.json');
  t.same((await readCheckpointTokenizer(dir)).tok.encode('a b'), [3, 2], 'through the codec too');
  await writeFile(join(dir, 'tokenizer.json'), tokenizerJson);
  t.same((await HfTokenizer.fromDir(dir)).encode('a b'), [2, 3], 'the first one again');
  await writeFile(join(dir, 'tokenizer.json'), tokenizerJsonText(WorldTokenizer.build(['a b c'])));
  t.equal((await readCheckpointTokenizer(dir)).kind, 'world', "a world's tokenizer written over it");
  t.equal(QWEN3_TOKENIZER_DIR.endsWith('models'), true);
});
