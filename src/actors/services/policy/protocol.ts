/**
 * What the policy service speaks on `svc.generate`: the request a rollout's generate actor sends
 * and the reply it gets. service-requests.ts validates the request at the edge against this shape;
 * checkGenerateReply validates the reply where the caller receives it (requestGenerate), so a
 * reply from another process is checked before a rollout keeps any of it.
 */
import { FINISH_REASONS, isFinishReason } from '../../../util/finish-reason.js';
import type { GeneratedTurn, TurnSampling } from '../../../util/generate-turn.js';

/** A turn's request on the wire: its sampling (util/generate-turn.ts) plus what the decoder needs. */
export interface GenerateCall extends TurnSampling {
  policyVersion: number;
  prompt: number[];
  stopTokens: number[];
  /** Strings that end generation, checked on the decoded text (a tag split across BPE tokens). */
  stopStrings?: string[];
}

/** A turn's reply on the wire: what it produced plus the version that decoded it. */
export interface GenerateReply extends GeneratedTurn {
  version: number;
}

/** A generate reply that breaks the contract of its request; `field` names what is wrong. */
export class InvalidGenerateReplyError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'InvalidGenerateReplyError';
  }
}

const show = (x: unknown): string => {
  try {
    return JSON.stringify(x) ?? String(x);
  } catch {
    return String(x);
  }
};

/**
 * Throws InvalidGenerateReplyError unless `value` is a reply to `req`: `tokens` integer ids, no more
 * than `req.maxNewTokens` of them; `logprobs` finite numbers, one per token; `finish` one of
 * FINISH_REASONS; `version` the `req.policyVersion` the request named (a reply decoded by another
 * version is off-policy).
 */
export function checkGenerateReply(value: unknown, req: GenerateCall): asserts value is GenerateReply {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new InvalidGenerateReplyError('reply', `is ${show(value)}, not an object`);
  const r = value as { [k: string]: unknown };
  const { tokens, logprobs, finish, version } = r;
  if (!Array.isArray(tokens))
    throw new InvalidGenerateReplyError('tokens', `is ${show(tokens)}, not an array`);
  const badToken = tokens.findIndex((x) => !Number.isSafeInteger(x) || (x as number) < 0);
  if (badToken >= 0)
    throw new InvalidGenerateReplyError(
      'tokens',
      `tokens[${badToken}] is ${show(tokens[badToken])}, not a non-negative integer id`,
    );
  if (tokens.length > req.maxNewTokens)
    throw new InvalidGenerateReplyError(
      'tokens',
      `${tokens.length} tokens, more than the maxNewTokens ${req.maxNewTokens} asked for`,
    );
  if (!Array.isArray(logprobs))
    throw new InvalidGenerateReplyError('logprobs', `is ${show(logprobs)}, not an array`);
  if (logprobs.length !== tokens.length)
    throw new InvalidGenerateReplyError(
      'logprobs',
      `${logprobs.length} logprobs for ${tokens.length} tokens (one per token)`,
    );
  const badLp = logprobs.findIndex((x) => typeof x !== 'number' || !Number.isFinite(x));
  if (badLp >= 0)
    throw new InvalidGenerateReplyError(
      'logprobs',
      `logprobs[${badLp}] is ${show(logprobs[badLp])}, not a finite number`,
    );
  if (!isFinishReason(finish))
    throw new InvalidGenerateReplyError(
      'finish',
      `is ${show(finish)}, not one of ${FINISH_REASONS.join(', ')}`,
    );
  if (version !== req.policyVersion)
    throw new InvalidGenerateReplyError(
      'version',
      `is ${show(version)}, but the request named policy version ${req.policyVersion}`,
    );
}
