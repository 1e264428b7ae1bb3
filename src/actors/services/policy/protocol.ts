/**
 * What the policy service speaks on `svc.generate`: the request a rollout's generate actor sends
 * and the reply it gets. service-requests.ts validates the request at the edge against this shape.
 */

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
  finish: 'stop_token' | 'stop_string' | 'length';
  version: number;
}
