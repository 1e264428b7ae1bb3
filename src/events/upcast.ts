/**
 * Upcasters turn a stored event of an older schema version into the current one, one version at a
 * time (v1 -> v2 -> v3), so replay decodes old msgpack forever. To change a payload: bump
 * CURRENT_VERSION[type], then
 *
 *   UPCASTERS.register('learner.step', 1, (data) => ({ ...data, extra: {} }));
 *
 * Upcasters are pure functions of (data, meta); they never read the clock or the network.
 */
import { CURRENT_VERSION, type EventMeta, type EventType } from './catalog.js';
import { DuplicateUpcasterError, UnsupportedEventVersionError } from './errors.js';

/** Maps `data` of version `fromVersion` to version `fromVersion + 1`. */
export type Upcaster = (data: unknown, meta: EventMeta) => unknown;

export interface RawEvent {
  type: string;
  v: number;
  data: unknown;
  meta: unknown;
}

/** Upcasters by (type, from-version): decoding runs a stored payload through them up to the current version, so old logs stay readable. */
export class UpcasterRegistry {
  private readonly table = new Map<string, Upcaster>();

  constructor(private readonly current: Readonly<Record<string, number>> = CURRENT_VERSION) {}

  register(type: EventType | string, fromVersion: number, fn: Upcaster): void {
    const key = `${type}@${fromVersion}`;
    const prev = this.table.get(key);
    if (prev && prev !== fn) throw new DuplicateUpcasterError(type, fromVersion);
    this.table.set(key, fn);
  }

  /** Returns the event at its type's current version (the same object when already current). */
  upcast<T extends RawEvent>(raw: T): T {
    if (!Object.hasOwn(this.current, raw.type)) return raw; // unknown types fail validation later
    const current = this.current[raw.type];
    if (raw.v === current) return raw;
    if (!Number.isSafeInteger(raw.v) || raw.v > current || raw.v < 1) {
      throw new UnsupportedEventVersionError(raw.type, raw.v, current);
    }
    let data = raw.data;
    for (let v = raw.v; v < current; v++) {
      const step = this.table.get(`${raw.type}@${v}`);
      if (!step) throw new UnsupportedEventVersionError(raw.type, raw.v, current);
      data = step(data, raw.meta as EventMeta);
    }
    return { ...raw, v: current, data };
  }
}

/** The registry the codec uses. */
export const UPCASTERS = new UpcasterRegistry();

/**
 * rollout.completed v1 -> v2: v1 recorded a coarse `finishReason` (4 values); v2 records the rollout
 * machine's own `stopReason` (5 values). v1's 'format-error' merged an EOS without an answer and a
 * broken tag grammar; it maps to 'invalid-action' (both have reward 0 and no format credit, which is
 * all the learner and the audit read from it).
 */
const STOP_OF_V1_FINISH: Record<string, string> = {
  answer: 'answer',
  'max-tokens': 'length',
  'max-turns': 'tool-limit',
  'format-error': 'invalid-action',
};
UPCASTERS.register('rollout.completed', 1, (data) => {
  if (data === null || typeof data !== 'object') return data; // validation names the problem
  const { finishReason, ...rest } = data as { finishReason?: unknown };
  const stopReason = typeof finishReason === 'string' ? STOP_OF_V1_FINISH[finishReason] : undefined;
  return { ...rest, stopReason: stopReason ?? finishReason };
});

/**
 * rollout.completed v2 -> v3: v3 records each search decision's token span (`toolCallSpans`, the
 * call's query). v2 recorded none, and its beta-GRPO rewards were computed with the rule of the
 * time: a call's span is the whole generated run right before each observation run. That rule is
 * derived here from the loss mask, so an old log's rewards re-derive exactly as they were trained.
 */
export function wholeTurnSpans(lossMask: ArrayLike<number>): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  let start = -1;
  for (let j = 0; j < lossMask.length; j++) {
    if (lossMask[j] === 1) {
      if (start < 0) start = j;
    } else if (start >= 0) {
      spans.push([start, j]); // the run ended in a call: the observation follows it
      start = -1;
    }
  }
  return spans;
}
UPCASTERS.register('rollout.completed', 2, (data) => {
  if (data === null || typeof data !== 'object') return data;
  const { lossMask } = data as { lossMask?: unknown };
  if (!ArrayBuffer.isView(lossMask) && !Array.isArray(lossMask)) return data; // validation names it
  return { ...data, toolCallSpans: wholeTurnSpans(lossMask as ArrayLike<number>) };
});

/** tool.called v1 -> v2: v1 knew one tool (search) and recorded its passage ids and scores inline. */
UPCASTERS.register('tool.called', 1, (data) => {
  if (data === null || typeof data !== 'object') return data;
  const { passageIds, scores, ...rest } = data as { passageIds?: unknown; scores?: unknown };
  return { ...rest, tool: 'search', record: { passageIds, scores } };
});

/**
 * question.assigned v1 -> v2: v2 may carry the world's oracle `known`. A v1 event never did, so it
 * upcasts unchanged (the oracle stays absent and the audit notes it cannot recompute the oracle
 * rates). The version moved so that an older reader refuses v2 by its version, not by a key.
 */
UPCASTERS.register('question.assigned', 1, (data) => data);

/**
 * learner.step v1 -> v2 and policy.published v1 -> v2: v2 records the train request's digest (and
 * policy.published the checkpoint's manifest). A v1 event recorded none: they are null, and the
 * audit says the request-digest and manifest checks are not supported by this log.
 */
const recordedNone = (keys: string[]) => (data: unknown) =>
  data === null || typeof data !== 'object'
    ? data
    : { ...Object.fromEntries(keys.map((k) => [k, null])), ...(data as object) };
UPCASTERS.register('learner.step', 1, recordedNone(['requestSha256']));
UPCASTERS.register('policy.published', 1, recordedNone(['requestSha256', 'manifest', 'manifestSha256']));

/**
 * run.started v1 -> v2: v2 records the trainer's runtime (ORT version, provider, threads,
 * optimizer; payloads/run.ts) and the train requests' signer. A v1 log recorded neither: null,
 * and a verifier says it cannot check the runtime for this log.
 */
UPCASTERS.register('run.started', 1, recordedNone(['trainerRuntime', 'trainSigner']));
