/**
 * The parts of one generate turn that every layer speaks the same way: how it samples, what it
 * produced and why it ended. The rollout machine's request and result (src/machines/rollout.ts,
 * generate-result.ts) and the policy service's wire request and reply
 * (src/actors/services/policy/protocol.ts) are these plus what only their side knows (the machine:
 * rollout id, turn, the decoded text; the wire: the prompt, stop tokens, the version that
 * decoded). Here, the lowest layer, so a field renamed or retyped changes every side at once
 * instead of drifting apart in copies.
 */
import type { FinishReason } from './finish-reason.js';

/** How a turn samples: at most `maxNewTokens`, seeded, at `temperature` (0 = greedy) with nucleus `topP`. */
export interface TurnSampling {
  maxNewTokens: number;
  /** Seed of this turn's sampling Rng (the caller derives and records it). */
  seed: number;
  temperature: number;
  topP: number;
}

/** What a turn produced. */
export interface GeneratedTurn {
  /** New token ids, ending with the stop token when there is one. */
  tokens: number[];
  /** log pi(token) of each new token under the version that decoded it (same length as tokens). */
  logprobs: number[];
  /** Why the turn ended (src/util/finish-reason.ts). */
  finish: FinishReason;
}
