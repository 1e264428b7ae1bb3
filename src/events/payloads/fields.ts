/**
 * The conventions every event payload (`data`) follows, and the field schemas they share. The
 * payloads themselves are grouped by family: run.ts (the run's lifecycle), question.ts,
 * rollout.ts, learner.ts; src/events/catalog.ts ties each to its event type.
 *
 * Ids (runId, questionId, rolloutId), step and policy version live in the envelope (`meta`), not
 * here. Token ids, logprobs and masks are typed arrays: they are stored as such in msgpack
 * (`moreTypes`) and exported as plain number arrays in JSONL.
 *
 * Changing a payload shape means a new `v` for that type in CURRENT_VERSION plus an upcaster from
 * the old version (src/events/upcast.ts): stored events are decoded forever.
 */
import { int, string } from '../schema.js';

export const text = () => string({ nonEmpty: true });
export const count = () => int({ min: 0 });
/** A sha256 digest, lowercase hex. */
export const sha256Hex = () => string({ pattern: /^[0-9a-f]{64}$/, hint: '64 lowercase hex digits' });
