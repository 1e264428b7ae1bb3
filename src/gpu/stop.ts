/**
 * When a generated row is finished: a stop token (e.g. end of text), a stop string in the decoded
 * text (e.g. `</search>` or `</answer>`, which may span several tokens), or the length limit
 * (the one finish vocabulary: src/util/finish-reason.ts).
 * The token that completes a stop is kept in the output: trajectories are token-in/token-out, and
 * the rollout needs the closing tag it stopped on.
 */

import type { FinishReason } from '../util/finish-reason.js';

export { FINISH_REASONS, type FinishReason } from '../util/finish-reason.js';

export interface StopSpec {
  /** Token ids that end the row when sampled. */
  stopTokens?: readonly number[];
  /** Strings that end the row as soon as the decoded generated text contains one. */
  stopStrings?: readonly string[];
}

/** Turns token ids into text. Must be deterministic; used only to check stop strings. */
export type Detokenize = (ids: readonly number[]) => string;

/** A detokenizer for vocabularies whose text is the concatenation of per-token pieces. */
export function piecesDetokenizer(pieces: readonly string[]): Detokenize {
  return (ids) => {
    let s = '';
    for (const id of ids) s += pieces[id] ?? '';
    return s;
  };
}

export class StopConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StopConfigError';
  }
}

/** Tracks one row: feed it each sampled token, it says when (and why) the row is finished. */
export class StopChecker {
  readonly generated: number[] = [];
  finish?: FinishReason;
  /** The stop string that ended the row, when finish is 'stop_string'. */
  matched?: string;
  private readonly stopTokens: ReadonlySet<number>;
  private readonly stopStrings: readonly string[];
  private textLength = 0;

  constructor(
    spec: StopSpec,
    readonly maxNewTokens: number,
    private readonly detokenize?: Detokenize,
  ) {
    this.stopTokens = new Set(spec.stopTokens ?? []);
    this.stopStrings = (spec.stopStrings ?? []).filter((s) => s.length > 0);
    if (this.stopStrings.length > 0 && !detokenize) {
      throw new StopConfigError(
        `stop strings ${JSON.stringify(this.stopStrings)} need a detokenizer (vocabulary pieces)`,
      );
    }
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1)
      throw new StopConfigError(`max new tokens must be an integer >= 1, got ${maxNewTokens}`);
  }

  get done(): boolean {
    return this.finish !== undefined;
  }

  /** Appends a sampled token; returns the finish reason once the row is done. */
  push(token: number): FinishReason | undefined {
    if (this.finish) throw new StopConfigError('push after the row finished');
    this.generated.push(token);
    if (this.stopTokens.has(token)) this.finish = 'stop_token';
    else if (this.stopStrings.length > 0 && this.hitStopString()) this.finish = 'stop_string';
    else if (this.generated.length >= this.maxNewTokens) this.finish = 'length';
    return this.finish;
  }

  private hitStopString(): boolean {
    // Decode the whole generated text (merges may change earlier characters), but only search
    // the part a new token could have completed: anything earlier was checked already.
    const text = this.detokenize!(this.generated);
    for (const s of this.stopStrings) {
      if (text.indexOf(s, Math.max(0, this.textLength - s.length + 1)) >= 0) {
        this.matched = s;
        return true;
      }
    }
    this.textLength = text.length;
    return false;
  }
}
