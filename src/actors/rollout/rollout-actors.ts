/**
 * What the two sets of rollout-machine actors share (over NATS in rollout-worker.ts, in process for
 * evaluation in eval-rollouts.ts): a turn's decoding request in the environment's stop
 * conventions, the machine's result of a decoded turn, and the tool call whose observation is
 * inserted the environment's way.
 */
import type { GenerateRequest, GenerateResult } from '../../machines/rollout.js';
import type { TextEnvironment } from '../../text/environment.js';
import { toolCallTokenSpan } from '../../text/token-span.js';
import type { AnyTool, ServiceCall } from '../../tools/tool.js';
import type { FinishReason } from '../../util/finish-reason.js';
import { toolCallActor } from './tool-calls.js';

/** A turn's decoding request: the machine's input with the environment's stop tokens and strings. */
export function turnDecodeRequest(input: GenerateRequest, env: TextEnvironment) {
  return {
    prompt: input.tokens,
    maxNewTokens: input.maxNewTokens,
    seed: input.seed,
    temperature: input.temperature,
    topP: input.topP,
    stopTokens: [...env.stopTokens],
    ...(env.stopStrings.length > 0 ? { stopStrings: [...env.stopStrings] } : {}),
  };
}

/**
 * The machine's result of a decoded turn: ended by EOS, cut at the length limit, or stopped at a
 * tag. A turn that ends in a call of one of `toolTags` also carries the call's token span (the
 * tokens of its query; src/text/token-span.ts), found from prefix decodes of the turn as the
 * environment reads it: beta-GRPO's confidence is taken over exactly those tokens.
 */
export function turnResult(
  env: TextEnvironment,
  input: GenerateRequest,
  tokens: number[],
  logprobs: number[],
  cutAtLength: boolean,
  toolTags: readonly string[],
): GenerateResult {
  const last = tokens[tokens.length - 1];
  const finish: FinishReason = env.codec.stopIds.includes(last)
    ? 'stop_token'
    : cutAtLength
      ? 'length'
      : 'stop_string';
  const text = env.turnText(tokens, input.turn);
  const prefixText = (k: number) =>
    k === tokens.length ? text : env.turnText(tokens.slice(0, k), input.turn);
  const callSpan = toolCallTokenSpan(tokens.length, prefixText, toolTags);
  return { tokens, logprobs, text, finish, ...(callSpan ? { callSpan } : {}) };
}

/** The tags the machine's tool calls use, from the tools the actors call. */
export const toolTagsOf = (tools: readonly AnyTool[]): string[] => tools.map((t) => t.tag);

/** The `callTool` actor over `service`; the observation is tokenized alone and appended, so the
 * generated ids before it are never re-tokenized. */
export function envToolCallActor(tools: readonly AnyTool[], service: ServiceCall, env: TextEnvironment) {
  return toolCallActor(tools, service, {
    insert: (observation) => {
      const text = env.wrap(observation);
      return { text, tokens: env.encode(text) };
    },
  });
}
