/**
 * What the two sets of rollout-machine actors share (over NATS in rollout-worker.ts, in process for
 * evaluation in eval-rollouts.ts): a turn's decoding request in the environment's stop
 * conventions, the machine's result of a decoded turn, and the tool call whose observation is
 * inserted the environment's way.
 */
import type { GenerateRequest, GenerateResult } from '../machines/rollout.js';
import type { TextEnvironment } from '../text/environment.js';
import type { AnyTool, ServiceCall } from '../tools/tool.js';
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

/** The machine's result of a decoded turn: ended by EOS, cut at the length limit, or stopped at a tag. */
export function turnResult(
  env: TextEnvironment,
  input: GenerateRequest,
  tokens: number[],
  logprobs: number[],
  cutAtLength: boolean,
): GenerateResult {
  const last = tokens[tokens.length - 1];
  const finish = env.codec.stopIds.includes(last) ? 'eos' : cutAtLength ? 'length' : 'stop';
  return { tokens, logprobs, text: env.turnText(tokens, input.turn), finish };
}

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
