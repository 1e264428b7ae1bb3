/**
 * Scripted stand-ins for the policy and search services, for machine tests: a whitespace
 * "tokenizer" with a growing vocabulary (every tag a single token, as in the world's tokenizer),
 * a `generate` actor that plays scripted turns, and a `callTool` actor (the search tool) that
 * answers with a fixed observation block.
 */
import { fromPromise } from 'xstate';
import type { GenerateRequest, GenerateResult, ToolRequest, ToolResult } from '../../src/machines/rollout.js';
import { toolCallTokenSpan } from '../../src/text/token-span.js';

export class ToyTokenizer {
  private ids = new Map<string, number>();
  private words: string[] = [];
  encode(text: string): number[] {
    return text
      .split(/\s+/)
      .filter((w) => w.length > 0)
      .map((w) => {
        let id = this.ids.get(w);
        if (id === undefined) {
          id = this.words.length + 1; // 0 is padding
          this.ids.set(w, id);
          this.words.push(w);
        }
        return id;
      });
  }
  decode(ids: readonly number[]): string {
    return ids.map((i) => this.words[i - 1]).join(' ');
  }
}

export interface ScriptedCalls {
  generate: GenerateRequest[];
  search: ToolRequest[];
}

/**
 * `turnText(req)` returns the text of the next turn (or null for an immediate EOS). The actor
 * truncates to maxNewTokens like a real decoder and records every request.
 */
export function scriptedGenerate(
  tok: ToyTokenizer,
  calls: ScriptedCalls,
  turnText: (req: GenerateRequest) => string | null,
) {
  return fromPromise<GenerateResult, GenerateRequest>(async ({ input }) => {
    calls.generate.push(input);
    const text = turnText(input);
    if (text === null) return { tokens: [], logprobs: [], text: '', finish: 'stop_token' };
    let tokens = tok.encode(text);
    let finish: GenerateResult['finish'] = 'stop_string';
    if (tokens.length > input.maxNewTokens) {
      tokens = tokens.slice(0, input.maxNewTokens);
      finish = 'length';
    }
    const logprobs = tokens.map((_, i) => -0.1 * (i + 1));
    return { tokens, logprobs, text: tok.decode(tokens), finish, ...toyCallSpan(tok, tokens) };
  });
}

/**
 * The call span a real generate actor returns (src/text/token-span.ts over prefix decodes), for a
 * turn that ends in `</tag>` of any tag other than the grammar's own (custom tool tags included).
 */
export function toyCallSpan(tok: ToyTokenizer, tokens: readonly number[]): { callSpan?: [number, number] } {
  const text = tok.decode(tokens);
  const tag = /<\/([A-Za-z][\w-]*)>\s*$/.exec(text)?.[1];
  if (tag === undefined || ['think', 'information', 'answer'].includes(tag)) return {};
  const span = toolCallTokenSpan(tokens.length, (k) => tok.decode(tokens.slice(0, k)), [tag]);
  return span ? { callSpan: span } : {};
}

export function fakeSearch(tok: ToyTokenizer, calls: ScriptedCalls) {
  return fromPromise<ToolResult, ToolRequest>(async ({ input }) => {
    calls.search.push(input);
    const text = `<information> Doc 1(Title: ${input.query.replace(/\s+/g, '_')}) passage </information>`;
    return { tool: 'search', tokens: tok.encode(text), text, record: { passageIds: ['p1'], scores: [0.5] } };
  });
}
