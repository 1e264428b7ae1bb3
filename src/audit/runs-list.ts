/**
 * Every run in the event store, summarised by the run-summary projection. Only the run-level
 * events are read (run.started, step.started, learner.step, policy.published, run.finished: one
 * filtered pass each), so listing stays fast however many rollouts the runs hold.
 */
import type { AkbeEvent } from '../events/catalog.js';
import { decodeEvent } from '../events/codec.js';
import { fold } from '../events/projection.js';
import { type RunSummary, runSummary } from '../events/projections/run-summary.js';
import type { EventStore } from '../events/store.js';
import { readStream } from '../events/stream-reader.js';
import { EVENTS_STREAM } from '../events/subjects.js';

export const RUN_LEVEL = [
  'run.started',
  'step.started',
  'learner.step',
  'policy.published',
  'run.finished',
] as const;

export interface RunListing {
  runs: RunSummary[];
  /** Messages that could not be decoded (skipped here; `akbe events dead-letters` lists them). */
  undecodable: number;
}

/** Every run-level event of every run (one bounded, filtered read per type), by run, in stream order. */
export async function readRunLevelEvents(
  store: Pick<EventStore, 'js'>,
): Promise<{ byRun: Map<string, AkbeEvent[]>; undecodable: number }> {
  const byRun = new Map<string, Array<{ seq: number; event: AkbeEvent }>>();
  let undecodable = 0;
  for (const type of RUN_LEVEL) {
    for await (const m of readStream(store.js, EVENTS_STREAM, `akbe.*.evt.${type}`)) {
      let event: AkbeEvent;
      try {
        event = decodeEvent(m.data);
      } catch {
        undecodable++;
        continue;
      }
      event.meta.seq = m.seq;
      const list = byRun.get(event.meta.runId) ?? [];
      list.push({ seq: m.seq, event });
      byRun.set(event.meta.runId, list);
    }
  }
  const sorted = new Map(
    [...byRun].map(([runId, list]) => [runId, list.sort((a, b) => a.seq - b.seq).map((x) => x.event)]),
  );
  return { byRun: sorted, undecodable };
}

/** Newest first: by start time, runs without run.started last. */
export function newestFirst(a: RunSummary, b: RunSummary): number {
  return (b.startedAt ?? 0) - (a.startedAt ?? 0) || String(a.runId).localeCompare(String(b.runId));
}

export async function listRuns(store: Pick<EventStore, 'js'>): Promise<RunListing> {
  const { byRun, undecodable } = await readRunLevelEvents(store);
  const runs = [...byRun.values()].map((events) => fold(runSummary, events));
  runs.sort(newestFirst);
  return { runs, undecodable };
}
