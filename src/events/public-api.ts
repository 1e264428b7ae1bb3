/**
 * `akbe/events`: the run's record as a reader of an exported log or a live stream needs it: the
 * catalog (types, validation, current versions), the msgpack codec with its upcasters, the
 * subject names, the JetStream store and the projections (fold a run's events into a summary).
 */

export {
  type AkbeEvent,
  CURRENT_VERSION,
  createEvent,
  EVENT_TYPES,
  type EventDataMap,
  type EventMeta,
  type EventOf,
  type EventType,
  isEventType,
  validateEvent,
} from './catalog.js';
export { decodeEvent, encodeEvent, eventToJsonLine } from './codec.js';
export { defineProjection, fold, foldRun, type Projection } from './projection.js';
export { type ResumePoint, resumePoint } from './projections/resume-point.js';
export { type RunFigures, runFigures } from './projections/run-figures.js';
export { type RunSummary, runSummary } from './projections/run-summary.js';
export { EventStore, type EventStoreOptions, type StoredEvent } from './store.js';
export { EVENTS_STREAM, eventSubject, parseSubject, runEventsFilter, serviceSubject } from './subjects.js';
export { UPCASTERS, type Upcaster, UpcasterRegistry } from './upcast.js';
