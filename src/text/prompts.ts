/**
 * Prompt templates of the two rollout paths, in our own words, sized for a tiny model: a few
 * instruction tokens after the question. The two instructions share no word, so the last tokens
 * of the prompt tell the policy which path it is on.
 *
 *   with-tool:  <bos> <question> Search up to 6 times.
 *   no-tool:    <bos> <question> Answer from memory.
 *
 * The response grammar the policy learns in pretraining (and that src/rl/format.ts checks):
 *   with-tool:  <think> … </think> ( <search> q </search> <information> Doc 1(Title: t) … </information> )*
 *               [ <think> … </think> ] <answer> x </answer>          at most 6 searches
 *   no-tool:    <think> … </think> <answer> x </answer>
 * Generation stops at `</search>` (the environment then inserts the observation), at `</answer>`,
 * at `<eos>` or at the length limit. The reward's answer extraction (`extractAnswer`) and format
 * check (`checkFormat`) live in src/rl; the observation format in src/retrieval/observation.ts.
 */
import type { WorldTokenizer } from './word-tokenizer.js';

export type PromptPath = 'with-tool' | 'no-tool';

/** Searches a with-tool response may make (the paper's limit). */
export const MAX_SEARCHES = 6;

export const INSTRUCTIONS: Record<PromptPath, string> = {
  'with-tool': `Search up to ${MAX_SEARCHES} times.`,
  'no-tool': 'Answer from memory.',
};

/** Strings that end a generate call: the environment acts after each. */
export const STOP_STRINGS = ['</search>', '</answer>'] as const;

/**
 * The prompt text (without `<bos>`): the question, then the instruction. The instruction comes
 * last so that it sits next to the first response token: a 2-layer base conditioned on a path
 * marker at the start of the prompt drifted towards the no-tool behaviour as it memorised facts.
 */
export function promptText(path: PromptPath, question: string): string {
  return `${question} ${INSTRUCTIONS[path]}`;
}

/** The prompt's token ids: `<bos>` then the instruction and the question. */
export function promptIds(tok: WorldTokenizer, path: PromptPath, question: string): number[] {
  return [tok.bos, ...tok.encode(promptText(path, question))];
}

/** Token ids that end a generate call. */
export function stopIds(tok: WorldTokenizer): number[] {
  return [tok.tag['</search>'], tok.tag['</answer>'], tok.eos];
}

/** The observation block the environment inserts after a search (a formatted top-k text). */
export function informationBlock(observation: string): string {
  return `<information> ${observation.trim()} </information>`;
}

/** Phrases the demonstrations use inside `<think>`. */
export const THINK = {
  /** With-tool, before a search. A phrase of its own (not `unsure`): when the with-tool search and
   *  the no-tool guess shared "I am not sure.", the base tied that phrase to not knowing (which
   *  decides it without tools) and searched on only ~0.2 of the questions it knew. */
  search: 'Let me search.',
  /** No-tool, before a guess. */
  unsure: 'I am not sure.',
} as const;
