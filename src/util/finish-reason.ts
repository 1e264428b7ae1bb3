/**
 * Why a generate request finished: the one vocabulary every layer that generates or reads a
 * generation speaks (the decoder's stop checker in src/gpu/stop.ts, the policy service's reply on
 * `svc.generate`, the OpenAI-compatible completions client, the rollout machine's turn result).
 * Before it there were three (`'eos' | 'stop' | 'length'` among them), translated at each seam;
 * one list, checked at the process boundary, leaves nothing to translate.
 *
 *   stop_token   the model emitted an end/stop token (EOS, end of turn, a configured stop id)
 *   stop_string  a stop string matched in the decoded text (e.g. `</search>`, which may span tokens)
 *   length       the max-new-tokens limit was reached
 *
 * Not the stored vocabulary: a rollout's `stopReason` in the event log (STOP_REASONS in
 * src/rl/types.ts, with its own `'eos'`) says why a whole rollout ended and must stay readable in
 * old logs; src/machines/generate-result.ts maps a turn's finish onto it in one place.
 */
export const FINISH_REASONS = ['stop_token', 'stop_string', 'length'] as const;

export type FinishReason = (typeof FINISH_REASONS)[number];

/** Whether `x` is one of FINISH_REASONS (a value read from another process). */
export function isFinishReason(x: unknown): x is FinishReason {
  return typeof x === 'string' && (FINISH_REASONS as readonly string[]).includes(x);
}
