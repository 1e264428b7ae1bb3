/**
 * The contract of a generate actor's reply (the policy service's turn), checked by the rollout
 * machine before anything of it is kept: a reply that breaks it is a RolloutProtocolError, not a
 * rollout outcome.
 */
import type { StopReason } from '../rl/types.js';
import type { FinishReason } from '../util/finish-reason.js';
import type { GeneratedTurn } from '../util/generate-turn.js';

export class RolloutProtocolError extends Error {
  constructor(
    readonly rolloutId: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(message, opts);
    this.name = 'RolloutProtocolError';
  }
}

/**
 * A turn's result as the machine keeps it: what it produced (util/generate-turn.ts; the stop token
 * is `</search>`, `</answer>` or EOS; logprobs under `policyVersion`) plus its decoded text.
 */
export interface GenerateResult extends GeneratedTurn {
  /** The new tokens decoded, special tokens such as EOS left out. */
  text: string;
  /**
   * When the turn ends in a tool call: the tokens [start, end) of the call's query (of the whole
   * call, tags included, when the query is empty), as indices into `tokens`. The actor finds it
   * from prefix decodes (src/text/token-span.ts); a call turn without one breaks the contract.
   */
  callSpan?: [number, number];
}

/**
 * The stored stop reason (the event log's STOP_REASONS, src/rl/types.ts) of a rollout whose last
 * turn ended with `finish` and was neither an answer nor a tool call: the one place the generate
 * vocabulary meets the stored one. A turn cut at its token limit, or one that used up the
 * rollout's response budget (`budgetLeft` <= 0), is 'length'; a turn that stopped by itself (a
 * stop token, or a stop string that was no tool call) is 'eos', the stored name since log v1.
 */
export function storedStopReason(
  finish: FinishReason,
  budgetLeft: number,
): Extract<StopReason, 'eos' | 'length'> {
  if (finish === 'length' || budgetLeft <= 0) return 'length';
  return 'eos';
}

/** Throws RolloutProtocolError when `out` breaks the contract of a turn that asked for `asked` tokens. */
export function checkGenerateResult(rolloutId: string, out: GenerateResult, asked: number): void {
  if (out.tokens.length !== out.logprobs.length) {
    throw new RolloutProtocolError(
      rolloutId,
      `generate returned ${out.tokens.length} tokens but ${out.logprobs.length} logprobs`,
    );
  }
  if (out.tokens.length > asked) {
    throw new RolloutProtocolError(
      rolloutId,
      `generate returned ${out.tokens.length} tokens, more than the ${asked} asked for`,
    );
  }
  const span = out.callSpan;
  if (
    span !== undefined &&
    !(
      Array.isArray(span) &&
      span.length === 2 &&
      Number.isInteger(span[0]) &&
      Number.isInteger(span[1]) &&
      span[0] >= 0 &&
      span[0] < span[1] &&
      span[1] <= out.tokens.length
    )
  ) {
    throw new RolloutProtocolError(
      rolloutId,
      `generate returned call span ${JSON.stringify(span)}, not a non-empty range of its ${out.tokens.length} tokens`,
    );
  }
}
