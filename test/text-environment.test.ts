import t from 'tap';
import { piecesDetokenizer, StopChecker } from '../src/gpu/stop.js';
import { checkFormat } from '../src/rl/format.js';
import { extractAnswer } from '../src/rl/reward.js';
import { hfCodec } from '../src/text/codec.js';
import { searchR1Environment, worldEnvironment } from '../src/text/environment.js';
import { promptIds } from '../src/text/prompts.js';
import { WorldTokenizer } from '../src/text/word-tokenizer.js';
import { qwen3Tokenizer } from './helpers/hf-files.js';

async function qwen3Env() {
  const tok = await qwen3Tokenizer();
  return searchR1Environment(tok, hfCodec(tok));
}

t.test("Search-R1 prompts in Qwen3's chat format, written out by hand", async (t) => {
  const env = await qwen3Env();
  const withTool = env.codec.decode(env.promptIds('with-tool', ' Who wrote Hamlet? '));
  t.equal(
    withTool,
    '<|im_start|>user\n' +
      'Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. ' +
      'After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. ' +
      'You can search as many times as your want. ' +
      'If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. ' +
      'For example, <answer> Beijing </answer>. Question: Who wrote Hamlet?\n' +
      '<|im_end|>\n<|im_start|>assistant\n',
  );
  const noTool = env.codec.decode(env.promptIds('no-tool', 'Who wrote Hamlet?'));
  t.match(noTool, /^<\|im_start\|>user\nAnswer the given question from your own knowledge; no search engine/);
  t.notMatch(noTool, /<search>/, 'the no-tool prompt never mentions the search tag');
  const ids = env.promptIds('with-tool', 'Q?');
  t.same(ids.slice(0, 2), [151644, 872], '<|im_start|> user');
  t.same(ids.slice(-3), [151644, 77091, 198], 'ends with the assistant header');
  t.same(env.stopTokens, [151645], 'EOS <|im_end|>');
  t.same(env.stopStrings, ['</search>', '</answer>']);
  t.equal(env.padId, 151643, '<|endoftext|>');
});

t.test('a stop string split across BPE tokens ends generation at the token that completes it', async (t) => {
  const env = await qwen3Env();
  const text = '<think> not sure </think>\n<search> author of Hamlet </search> and more';
  const ids = env.codec.encode(text);
  const pieces = env.codec.pieces();
  // `</search>` is three tokens here: `Ġ</`, `search`, `>`.
  const close = ids.findIndex((_, i) =>
    ids
      .slice(0, i + 1)
      .map((id) => pieces[id])
      .join('')
      .includes('</search>'),
  );
  t.same(
    ids.slice(close - 2, close + 1).map((id) => pieces[id]),
    [' </', 'search', '>'],
  );
  const stop = new StopChecker(
    { stopTokens: env.stopTokens as number[], stopStrings: [...env.stopStrings] },
    100,
    piecesDetokenizer(pieces),
  );
  let finish: string | undefined;
  for (const id of ids) {
    finish = stop.push(id);
    if (finish) break;
  }
  t.equal(finish, 'stop_string');
  t.equal(stop.matched, '</search>');
  t.equal(stop.generated.length, close + 1, 'stopped on the `>` token, nothing after it');
  t.equal(env.turnText(stop.generated, 0), '<think> not sure </think>\n<search> author of Hamlet </search>');
});

t.test(
  'observations are tokenized alone and appended: the generated ids are never re-tokenized',
  async (t) => {
    const env = await qwen3Env();
    const turn1 = env.codec.encode(
      '<think>\nI need to look it up.\n</think>\n<search> Hamlet author </search>',
    );
    const obsText = env.wrap('Doc 1(Title: Hamlet) Hamlet is a tragedy by William Shakespeare.');
    t.equal(
      obsText,
      '\n\n<information>Doc 1(Title: Hamlet) Hamlet is a tragedy by William Shakespeare.</information>\n\n',
    );
    const obs = env.encode(obsText);
    const turn2 = [...env.codec.encode('<answer> William Shakespeare </answer>'), 151645];
    const response = [...turn1, ...obs, ...turn2];
    // The kept ids decode to the text the grammar read, segment by segment.
    const segments = [
      { kind: 'generated' as const, text: env.turnText(turn1, 0) },
      { kind: 'observation' as const, text: obsText },
      { kind: 'generated' as const, text: env.turnText(turn2, 1) },
    ];
    t.equal(env.codec.decode(response, { skipSpecialTokens: true }), segments.map((s) => s.text).join(''));
    t.same(checkFormat(segments, 'with-tool', { maxToolCalls: 3 }), { ok: true, reason: 'ok' });
    t.equal(extractAnswer(segments.map((s) => s.text).join('')), 'William Shakespeare');
    // Re-tokenizing the joined text would merge across the boundary (`>` + `\n\n` is one BPE token):
    // the trajectory would no longer be the ids the policy sampled.
    const retok = env.codec.encode(env.codec.decode(response));
    t.notSame(retok, response, 'encode(decode(ids)) differs from the ids');
    t.equal(env.codec.decode(retok), env.codec.decode(response), 'though it spells the same text');
  },
);

t.test('the world environment keeps the world base conventions', async (t) => {
  const tok = WorldTokenizer.build(['Who wrote Hamlet ? Search up to 6 times . Answer from memory .']);
  const env = worldEnvironment(tok);
  t.same(env.promptIds('with-tool', 'Who wrote Hamlet?'), promptIds(tok, 'with-tool', 'Who wrote Hamlet?'));
  t.same(env.stopTokens, [tok.tag['</search>'], tok.tag['</answer>'], tok.eos]);
  t.same(env.stopStrings, []);
  const ids = tok.encode('<think> Hamlet </think> <answer> Hamlet </answer>');
  t.equal(env.turnText(ids, 0), '<think> Hamlet </think> <answer> Hamlet </answer>');
  t.equal(
    env.turnText(ids, 1),
    ' <think> Hamlet </think> <answer> Hamlet </answer>',
    'a later turn after a space',
  );
  t.equal(
    env.wrap('Doc 1(Title: Hamlet) Hamlet'),
    ' <information> Doc 1(Title: Hamlet) Hamlet </information>',
  );
  t.equal(env.codec.pieces()[tok.tag['</search>']], ' </search>');
});
