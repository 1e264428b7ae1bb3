/**
 * Projections: views folded from a run's events. A projection is `{ name, initial, handles,
 * evolve }`; `evolve(state, event)` is pure and never throws for events it does not expect (it
 * returns the state unchanged). A view is rebuilt by folding from sequence 1: a new view is a
 * replay, not a migration. Each shipped projection lives in its own file under projections/.
 */
import type { AkbeEvent, EventOf, EventType } from './catalog.js';
import type { EventStore } from './store.js';
import type { StreamReadOptions } from './stream-reader.js';

/** A fold of a run's events into a state: the types it reads, an initial state and a reducer. */
export interface Projection<S, K extends EventType = EventType> {
  readonly name: string;
  initial(): S;
  /** The event types `evolve` looks at; others are skipped without calling it. */
  readonly handles: readonly K[];
  evolve(state: S, event: EventIn<K>): S;
}

/** The union of the events of types K. */
export type EventIn<K extends EventType> = { [T in K]: EventOf<T> }[K];

/** Declares a projection (typed by the event types it reads); `fold` and `foldRun` apply it. */
export function defineProjection<S, const K extends EventType>(p: Projection<S, K>): Projection<S, K> {
  return p;
}

function handles<S, K extends EventType>(p: Projection<S, K>, e: AkbeEvent): boolean {
  return (p.handles as readonly string[]).includes(e.type);
}

/** Pure fold over events already in memory. */
export function fold<S, K extends EventType>(
  p: Projection<S, K>,
  events: Iterable<AkbeEvent>,
  state: S = p.initial(),
): S {
  for (const e of events) if (handles(p, e)) state = p.evolve(state, e as unknown as EventIn<K>);
  return state;
}

export interface FoldResult<S> {
  state: S;
  /** Events folded (including those the projection does not handle). */
  events: number;
  /** Stream sequence of the last event seen (0 when the run has none). */
  lastSeq: number;
}

/** Replays one run from the store and folds it (bad messages are dead-lettered by the replay). */
export async function foldRun<S, K extends EventType>(
  store: EventStore,
  runId: string,
  p: Projection<S, K>,
  opts: StreamReadOptions = {},
): Promise<FoldResult<S>> {
  let state = p.initial();
  let events = 0;
  let lastSeq = 0;
  for await (const { seq, event } of store.replay(runId, opts)) {
    if (handles(p, event)) state = p.evolve(state, event as unknown as EventIn<K>);
    events++;
    lastSeq = seq;
  }
  return { state, events, lastSeq };
}
