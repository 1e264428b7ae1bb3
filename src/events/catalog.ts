/**
 * The event catalog: every fact the system records, as one discriminated union keyed by `type`.
 *
 *   { type: 'rollout.completed', v: 1, data: {...}, meta: { runId, step, policyVersion,
 *     questionId, rolloutId, at, dedupeId, causationId?, seed?, seq? } }
 *
 * - `v` is the schema version of `data` for that type (CURRENT_VERSION); older versions are
 *   upcast on read (src/events/upcast.ts).
 * - `meta` is the common envelope. `at` is the monotonic timestamp of src/events/clock.ts.
 *   `dedupeId` becomes JetStream's `Nats-Msg-Id`: it is derived from the event's identity
 *   (run, step, ids, turn), so a retried append after a crash is stored once. `seq` is the
 *   JetStream stream sequence, filled in on read only (never written). `causationId` is the
 *   dedupeId of the event or command that caused this one.
 * - Question-scoped types need `meta.questionId`; rollout-scoped types also `meta.rolloutId`.
 *
 * `validateEvent(x)` checks an unknown value and throws `InvalidEventError` naming the field:
 * `rollout.completed: data.reward must be a finite number (got string)`.
 */
import { type EventClock, processClock } from './clock.js';
import { InvalidEventError } from './errors.js';
import { type LearnerStepData, learnerStep } from './payloads/learner.js';
import {
  type BoundaryLabeledData,
  boundaryLabeled,
  type GroupCompletedData,
  groupCompleted,
  type QuestionAssignedData,
  questionAssigned,
} from './payloads/question.js';
import {
  type RolloutCompletedData,
  type RolloutStartedData,
  type RolloutTurnData,
  rolloutCompleted,
  rolloutStarted,
  rolloutTurn,
  type ToolCalledData,
  toolCalled,
} from './payloads/rollout.js';
import {
  type EvalCompletedData,
  evalCompleted,
  type PolicyPublishedData,
  policyPublished,
  type RunFinishedData,
  type RunStartedData,
  runFinished,
  runStarted,
  type StepStartedData,
  stepStarted,
} from './payloads/run.js';
import { int, number, object, optional, type Schema, SchemaViolation, string, uint32 } from './schema.js';

export * from './payloads/learner.js';
export * from './payloads/question.js';
export * from './payloads/rollout.js';
export * from './payloads/run.js';
// The stored vocabulary is the catalog's own (payloads/vocabulary.ts says why); re-exported so
// readers of events need one import.
export type {
  BoundaryCategory,
  CategoryCounts,
  RolloutPath,
  StopReason,
  TurnActionKind,
} from './payloads/vocabulary.js';
export {
  BOUNDARY_CATEGORIES,
  categoryOf,
  ROLLOUT_PATHS,
  STOP_REASONS,
  TURN_ACTIONS,
} from './payloads/vocabulary.js';

/** Payload type per event type. */
export interface EventDataMap {
  'run.started': RunStartedData;
  'step.started': StepStartedData;
  'question.assigned': QuestionAssignedData;
  'rollout.started': RolloutStartedData;
  'rollout.turn': RolloutTurnData;
  'tool.called': ToolCalledData;
  'rollout.completed': RolloutCompletedData;
  'group.completed': GroupCompletedData;
  'boundary.labeled': BoundaryLabeledData;
  'learner.step': LearnerStepData;
  'policy.published': PolicyPublishedData;
  'eval.completed': EvalCompletedData;
  'run.finished': RunFinishedData;
}
/** The name of an event type (`run.started`, `rollout.completed`, ...). */
export type EventType = keyof EventDataMap;

/** The schema version this build writes for each type. Bump with an upcaster from the old one. */
export const CURRENT_VERSION: Readonly<Record<EventType, number>> = {
  'run.started': 2,
  'step.started': 1,
  'question.assigned': 2,
  'rollout.started': 1,
  'rollout.turn': 1,
  'tool.called': 2,
  'rollout.completed': 3,
  'group.completed': 1,
  'boundary.labeled': 1,
  'learner.step': 2,
  'policy.published': 2,
  'eval.completed': 1,
  'run.finished': 1,
};

/** Every event type of the catalog, in catalog order. */
export const EVENT_TYPES = Object.keys(CURRENT_VERSION) as EventType[];

const DATA_SCHEMA: { [K in EventType]: Schema<EventDataMap[K]> } = {
  'run.started': runStarted,
  'step.started': stepStarted,
  'question.assigned': questionAssigned,
  'rollout.started': rolloutStarted,
  'rollout.turn': rolloutTurn,
  'tool.called': toolCalled,
  'rollout.completed': rolloutCompleted,
  'group.completed': groupCompleted,
  'boundary.labeled': boundaryLabeled,
  'learner.step': learnerStep,
  'policy.published': policyPublished,
  'eval.completed': evalCompleted,
  'run.finished': runFinished,
};

type RolloutScoped = 'rollout.started' | 'rollout.turn' | 'tool.called' | 'rollout.completed';
type QuestionScoped = RolloutScoped | 'question.assigned' | 'group.completed' | 'boundary.labeled';
const SCOPE: Record<EventType, 'run' | 'question' | 'rollout'> = {
  'run.started': 'run',
  'step.started': 'run',
  'question.assigned': 'question',
  'rollout.started': 'rollout',
  'rollout.turn': 'rollout',
  'tool.called': 'rollout',
  'rollout.completed': 'rollout',
  'group.completed': 'question',
  'boundary.labeled': 'question',
  'learner.step': 'run',
  'policy.published': 'run',
  'eval.completed': 'run',
  'run.finished': 'run',
};

/** Subject-safe run id: it is a NATS subject token (`akbe.<runId>.evt.>`). */
export const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** Printable ASCII without spaces: safe as a `Nats-Msg-Id` header value. */
const DEDUPE_ID_PATTERN = /^[\x21-\x7e]{1,256}$/;

/** The envelope every event carries: run, step, policy version, ids, seed, timestamp and dedupe id (JetStream `Nats-Msg-Id`). */
export interface EventMeta {
  runId: string;
  /** Training step (0 for run-level events before the first step). */
  step: number;
  /** Policy version the event belongs to (the rollout policy for rollout events). */
  policyVersion: number;
  questionId?: string;
  rolloutId?: string;
  /** ms since epoch, µs resolution, strictly increasing per process (src/events/clock.ts). */
  at: number;
  /** JetStream stream sequence; set on read, never written. */
  seq?: number;
  /** JetStream `Nats-Msg-Id`: identical ids are stored once within the duplicate window. */
  dedupeId: string;
  /** dedupeId of the event or command that caused this one. */
  causationId?: string;
  /** Seed of the random draw this event records, when there is one. */
  seed?: number;
}

export type MetaFor<K extends EventType> = EventMeta &
  (K extends RolloutScoped
    ? { questionId: string; rolloutId: string }
    : K extends QuestionScoped
      ? { questionId: string }
      : unknown);

/** The event of type `K`: its type, schema version, payload and envelope. */
export type EventOf<K extends EventType> = { type: K; v: number; data: EventDataMap[K]; meta: MetaFor<K> };
/** The union of all events, narrowed by `switch (event.type)`. */
export type AkbeEvent = { [K in EventType]: EventOf<K> }[EventType];

const text = () => string({ nonEmpty: true });
const metaSchema = object<EventMeta>({
  runId: string({ pattern: RUN_ID_PATTERN, hint: '[A-Za-z0-9_-]{1,64}' }),
  step: int({ min: 0 }),
  policyVersion: int({ min: 0 }),
  questionId: optional(text()),
  rolloutId: optional(text()),
  at: number({ min: 1 }),
  seq: optional(int({ min: 1 })),
  dedupeId: string({ pattern: DEDUPE_ID_PATTERN, hint: 'printable ASCII without spaces, 1-256 chars' }),
  causationId: optional(text()),
  seed: optional(uint32()),
});

/** Whether `x` names an event type of the catalog. */
export function isEventType(x: unknown): x is EventType {
  return typeof x === 'string' && Object.hasOwn(CURRENT_VERSION, x);
}

/**
 * Checks that `x` is a valid event of the current schema version and returns it typed.
 * Throws InvalidEventError naming the first bad field.
 */
export function validateEvent(x: unknown): AkbeEvent {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) {
    throw new InvalidEventError(
      'event',
      'event',
      `must be an object (got ${x === null ? 'null' : typeof x})`,
    );
  }
  const e = x as Record<string, unknown>;
  if (!isEventType(e.type)) {
    throw new InvalidEventError(
      String(e.type ?? 'event'),
      'type',
      `must be one of ${EVENT_TYPES.join('|')} (got ${JSON.stringify(e.type)})`,
    );
  }
  const type = e.type;
  try {
    if (e.v !== CURRENT_VERSION[type])
      throw new SchemaViolation('v', `must be ${CURRENT_VERSION[type]} (got ${JSON.stringify(e.v)})`);
    for (const key of Object.keys(e)) {
      if (!['type', 'v', 'data', 'meta'].includes(key))
        throw new SchemaViolation(key, 'is not a known field');
    }
    metaSchema.check(e.meta, 'meta');
    const meta = e.meta as EventMeta;
    const scope = SCOPE[type];
    if (scope !== 'run' && meta.questionId === undefined)
      throw new SchemaViolation('meta.questionId', 'is required');
    if (scope === 'rollout' && meta.rolloutId === undefined)
      throw new SchemaViolation('meta.rolloutId', 'is required');
    DATA_SCHEMA[type].check(e.data, 'data');
  } catch (err) {
    if (err instanceof SchemaViolation)
      throw new InvalidEventError(type, err.path, err.problem, { cause: err });
    throw err;
  }
  return e as AkbeEvent;
}

/** The default dedupe id: the event's identity, so that a retried append is stored once. */
export function defaultDedupeId<K extends EventType>(
  type: K,
  data: EventDataMap[K],
  meta: Omit<MetaFor<K>, 'at' | 'dedupeId'>,
): string {
  const m = meta as unknown as EventMeta;
  const { runId, step } = m;
  switch (SCOPE[type]) {
    case 'run':
      if (type === 'run.started' || type === 'run.finished') return `${runId}:${type}`;
      if (type === 'policy.published') return `${runId}:${type}:${(data as PolicyPublishedData).version}`;
      if (type === 'eval.completed') {
        const d = data as EvalCompletedData;
        return `${runId}:${type}:${d.when}:v${d.version}:${d.split}`;
      }
      return `${runId}:${step}:${type}`;
    case 'question':
      return `${runId}:${step}:${m.questionId}:${type}`;
    case 'rollout': {
      const turn =
        type === 'rollout.turn' || type === 'tool.called' ? `:${(data as { turn: number }).turn}` : '';
      return `${runId}:${step}:${m.rolloutId}:${type}${turn}`;
    }
  }
}

export type MetaInput<K extends EventType> = Omit<MetaFor<K>, 'at' | 'dedupeId' | 'seq'> & {
  at?: number;
  dedupeId?: string;
};

/**
 * Builds and validates an event of the current version. `at` defaults to the process clock and
 * `dedupeId` to the event's identity (`defaultDedupeId`); pass either to override.
 */
export function createEvent<K extends EventType>(
  type: K,
  data: EventDataMap[K],
  meta: MetaInput<K>,
  clock: EventClock = processClock,
): EventOf<K> {
  const { at, dedupeId, ...rest } = meta;
  const full = {
    ...rest,
    at: at ?? clock.now(),
    dedupeId: dedupeId ?? defaultDedupeId(type, data, rest as Omit<MetaFor<K>, 'at' | 'dedupeId'>),
  } as MetaFor<K>;
  // Drop undefined optionals so that the stored bytes and the JSONL export carry no empty keys.
  for (const key of Object.keys(full) as Array<keyof typeof full>)
    if (full[key] === undefined) delete full[key];
  const event = { type, v: CURRENT_VERSION[type], data, meta: full } as EventOf<K>;
  validateEvent(event);
  return event;
}
