/**
 * What the policy service speaks on `svc.generate`: the request a rollout's generate actor sends
 * and the reply it gets. service-requests.ts validates the request at the edge against this shape.
 */
import type { FinishReason } from '../../../util/finish-reason.js';

export interface GenerateCall {
  policyVersion: number;
  prompt: number[];
  maxNewTokens: number;
  seed: number;
  temperature: number;
  topP: number;
  stopTokens: number[];
  /** Strings that end generation, checked on the decoded text (a tag split across BPE tokens). */
  stopStrings?: string[];
}

export interface GenerateReply {
  tokens: number[];
  logprobs: number[];
  finish: FinishReason;
  version: number;
}
