/**
 * Turn texts for logs that recorded only token ids. Token-in/token-out: every text the rollout
 * machine parsed was decoded from ids the log holds (rollout.turn.tokenIds,
 * tool.called.observationTokenIds), so with the run's tokenizer the segments can be rebuilt:
 *
 *   generated  = decode(turn tokens), with a leading space after the first non-empty turn
 *   observation = ' ' + decode(observation tokens)
 *
 * which is how the rollout worker (src/actors/rollout/rollout-worker.ts) forms them. The tag grammar and
 * the answer extraction ignore whitespace between blocks, so the rebuilt texts score exactly as
 * the originals.
 */
import type { ResponseSegment } from '../events/catalog.js';
import type { RolloutLog, RunLog } from './run-log.js';

export type Decode = (ids: ArrayLike<number>) => string;

export function segmentsFromTokens(r: RolloutLog, decode: Decode): ResponseSegment[] {
  const out: ResponseSegment[] = [];
  for (const turn of r.turns) {
    const text = decode(turn.data.tokenIds);
    out.push({ kind: 'generated', text: turn.data.turn > 0 && text !== '' ? ` ${text}` : text });
    const tool = r.tools.find((x) => x.data.turn === turn.data.turn);
    if (tool) out.push({ kind: 'observation', text: ` ${decode(tool.data.observationTokenIds)}` });
  }
  return out;
}

/**
 * Fills `segments` of every finished rollout that has turn events but no recorded segments
 * (in memory only). Returns how many were filled.
 */
export function fillSegments(log: RunLog, decode: Decode): number {
  let filled = 0;
  for (const s of log.steps.values())
    for (const q of s.questions.values())
      for (const r of q.rollouts.values()) {
        if (!r.completed || r.completed.data.segments || r.turns.length === 0) continue;
        r.completed.data.segments = segmentsFromTokens(r, decode);
        filled++;
      }
  return filled;
}
