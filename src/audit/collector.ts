/**
 * What the audit's checks report to: a Mismatch names the event (its JetStream sequence), the
 * field, and both values; notes say what the log does not hold, so was not checked.
 */
import type { TrainStepRequest } from '../rl/train-request.js';

/** One step's train request rebuilt from the log (rebuilt-request.ts) and whether the log's digest agreed. */
export interface RebuiltStep {
  step: number;
  request: TrainStepRequest;
  /** The rebuilt request's digest equals learner.step.requestSha256 (null: a v1 log records none). */
  digestMatches: boolean | null;
}

export interface Mismatch {
  /** JetStream sequence of the event holding the recorded value (0: not stored / missing). */
  seq: number;
  eventType: string;
  step: number;
  questionId?: string;
  rolloutId?: string;
  field: string;
  recorded: unknown;
  recomputed: unknown;
}

/** How many of each thing the audit re-derived. */
export interface AuditCounts {
  rollouts: number;
  labels: number;
  steps: number;
  rows: number;
}

export type Where = Omit<Mismatch, 'field' | 'recorded' | 'recomputed'>;

export class Collector {
  readonly mismatches: Mismatch[] = [];
  readonly notes = new Set<string>();
  /** Each step's train request as rebuilt from the log, when asked for (`--verify-training`). */
  readonly requests?: RebuiltStep[];

  constructor(opts: { keepRequests?: boolean } = {}) {
    if (opts.keepRequests) this.requests = [];
  }

  /** Compares with ===, or structurally for arrays and plain objects. */
  check(where: Where, field: string, recorded: unknown, recomputed: unknown): boolean {
    if (sameValue(recorded, recomputed)) return true;
    this.mismatches.push({ ...where, field, recorded, recomputed });
    return false;
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return Number.isNaN(a) && Number.isNaN(b);
  if (ArrayBuffer.isView(a)) a = Array.from(a as unknown as ArrayLike<number>);
  if (ArrayBuffer.isView(b)) b = Array.from(b as unknown as ArrayLike<number>);
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a).sort();
    const kb = Object.keys(b).sort();
    return (
      sameValue(ka, kb) &&
      ka.every((k) => sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
    );
  }
  return false;
}
