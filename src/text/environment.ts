/**
 * The text environment of a rollout: how a question becomes prompt ids, what ends a generate
 * call, how a generated turn reads as text, and how an observation is wrapped and tokenized. The
 * rollout machine, the tag grammar (src/rl/format.ts) and the tools (src/tools) are the same for
 * every policy; only these conventions differ between tokenizers:
 *
 *   world      the synthetic world's base policy: its word-level tokenizer, `<bos> question
 *              instruction` prompts, every tag one token (src/text/prompts.ts)
 *   search-r1  a Hugging Face checkpoint (Qwen, Llama, …): Search-R1's instruction rendered with the
 *              model's chat template; tags are several BPE tokens, so `</search>` and `</answer>`
 *              are stop strings checked on the decoded text (src/gpu/stop.ts), not stop ids
 *
 * Token-in/token-out: the ids the policy generated are kept as they are; only the observation
 * text, which the environment writes, is tokenized (alone) and appended.
 */
import type { RolloutPath } from '../rl/types.js';
import { hfCodec, readCheckpointTokenizer, type TextCodec, worldCodec } from './codec.js';
import type { HfTokenizer } from './hf-tokenizer.js';
import { informationBlock, STOP_STRINGS, promptIds as worldPromptIds } from './prompts.js';
import type { WorldTokenizer } from './word-tokenizer.js';

export interface TextEnvironment {
  readonly name: 'world' | 'search-r1';
  readonly codec: TextCodec;
  /** The prompt of a question on a path, as token ids. */
  promptIds(path: RolloutPath, question: string): number[];
  /** Ids that end a generate call (EOS; the world's tag ids). */
  readonly stopTokens: readonly number[];
  /** Strings that end a generate call, found on the decoded text even when split across tokens. */
  readonly stopStrings: readonly string[];
  /** Padding id of training batches. */
  readonly padId: number;
  /** The text of a generated turn (turn 0 first), as the grammar reads it. */
  turnText(ids: readonly number[], turn: number): string;
  /** An observation's text -> the inserted segment's text (the `<information>` block). */
  wrap(observation: string): string;
  /** Token ids of an inserted segment (tokenized alone, never merged with the generated ids). */
  encode(text: string): number[];
}

/** The world's conventions (what the committed base was pretrained on). */
export function worldEnvironment(tok: WorldTokenizer): TextEnvironment {
  const codec = worldCodec(tok);
  return {
    name: 'world',
    codec,
    promptIds: (path, question) => worldPromptIds(tok, path, question),
    stopTokens: [tok.tag['</search>'], tok.tag['</answer>'], tok.eos],
    stopStrings: [],
    padId: tok.pad,
    // The world decoder joins pieces with spaces; a later turn continues after one.
    turnText: (ids, turn) => {
      const text = tok.decode(ids);
      return turn > 0 && text !== '' ? ` ${text}` : text;
    },
    // The world tokenizer reads any whitespace as one space: the observation goes on one line.
    wrap: (observation) => ` ${informationBlock(observation.trim().replace(/\s+/g, ' '))}`,
    encode: (text) => tok.encode(text),
  };
}

/**
 * Search-R1's instruction (Jin et al., 2025, the prompt its models were trained with), for the
 * with-tool path. The no-tool path keeps its shape and format but forbids searching.
 */
export const SEARCH_R1_INSTRUCTION: Record<RolloutPath, (question: string) => string> = {
  'with-tool': (q) =>
    'Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. ' +
    'After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. ' +
    'You can search as many times as your want. ' +
    'If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. ' +
    `For example, <answer> Beijing </answer>. Question: ${q.trim()}\n`,
  'no-tool': (q) =>
    'Answer the given question from your own knowledge; no search engine is available. ' +
    'Conduct your reasoning inside <think> and </think>, then provide the answer inside <answer> and </answer>, without detailed illustrations. ' +
    `For example, <answer> Beijing </answer>. Question: ${q.trim()}\n`,
};

export interface SearchR1Options {
  /** Render the instruction as a user turn with the chat template (default when the tokenizer has one). */
  chat?: boolean;
  /** Passed to templates that switch reasoning (Qwen3's enable_thinking); default: the template's own. */
  enableThinking?: boolean;
}

/** Search-R1's conventions for a Hugging Face tokenizer. */
export function searchR1Environment(
  tok: HfTokenizer,
  codec: TextCodec,
  o: SearchR1Options = {},
): TextEnvironment {
  const chat = o.chat ?? tok.chatTemplate !== null;
  return {
    name: 'search-r1',
    codec,
    promptIds: (path, question) => {
      const instruction = SEARCH_R1_INSTRUCTION[path](question);
      const text = chat
        ? tok.renderChat([{ role: 'user', content: instruction }], { enableThinking: o.enableThinking })
        : instruction;
      // A template writes the BOS itself; a raw prompt gets the post-processor's (Llama's <s>).
      return tok.encode(text, { addSpecialTokens: !chat });
    },
    stopTokens: codec.stopIds,
    stopStrings: [...STOP_STRINGS],
    padId: codec.padId,
    turnText: (ids) => codec.decode(ids, { skipSpecialTokens: true }),
    // Search-R1 inserts the retrieved documents between blank lines.
    wrap: (observation) => `\n\n<information>${observation.trim()}</information>\n\n`,
    encode: (text) => codec.encode(text),
  };
}

/**
 * The environment of a policy checkpoint: the world's when its tokenizer is the world's (read from
 * the world directory, which the rollouts' questions and corpus come from), else Search-R1's over
 * the checkpoint's own Hugging Face tokenizer.
 */
export async function loadEnvironment(
  policyDir: string,
  worldTokenizer: () => Promise<WorldTokenizer>,
): Promise<TextEnvironment> {
  const t = await readCheckpointTokenizer(policyDir);
  if (t.kind === 'world') return worldEnvironment(await worldTokenizer());
  return searchR1Environment(t.tok, hfCodec(t.tok));
}

/** Token id -> text piece for a policy runtime, when the environment has stop strings to find. */
export function stopPieces(env: TextEnvironment): string[] | undefined {
  return env.stopStrings.length > 0 ? env.codec.pieces() : undefined;
}
