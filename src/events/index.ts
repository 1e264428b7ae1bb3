/**
 * The event backbone's public surface: import from here (`../events/index.js`) rather than from
 * the individual files. msgpackr and NATS stay behind these functions (house style 6).
 */
export * from './catalog.js';
export { type EventClock, ManualClock, MonotonicClock, processClock } from './clock.js';
export { decodeEvent, encodeEvent, eventToJsonLine, toJsonValue } from './codec.js';
export { type DeadLetter, type DeadLetterReport, deadLetterRequest, writeDeadLetter } from './dead-letter.js';
export * from './errors.js';
export {
  defineProjection,
  type EventIn,
  type FoldResult,
  fold,
  foldRun,
  type Projection,
} from './projection.js';
export { type RunSummary, runSummary } from './projections/run-summary.js';
export {
  type AppendResult,
  EventStore,
  type EventStoreOptions,
  type EventSubscription,
  type StoredEvent,
} from './store.js';
export type { StreamReadOptions } from './stream-reader.js';
export * from './subjects.js';
export { syntheticRollout, syntheticRunEvents } from './synthetic.js';
export { formatTailLine, keyData } from './tail-format.js';
export { UPCASTERS, type Upcaster, UpcasterRegistry } from './upcast.js';
