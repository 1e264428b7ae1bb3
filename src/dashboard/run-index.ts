/**
 * The dashboard's in-memory view of every run: the run-level events (a handful per step), loaded
 * once by a bounded read and then extended by the live pushes, so the runs table and the run page
 * are answered from memory and the browser is told of each change (no log is re-read per page).
 *
 * The live subscription starts before the bounded read, so an event may arrive from both: events
 * are kept once by their dedupe id. A learner.step keeps its metrics but not its trained batch
 * (one row per trained rollout; the audit reads it from the log when asked).
 */

import { newestFirst } from '../audit/runs-list.js';
import type { AkbeEvent } from '../events/catalog.js';
import { fold } from '../events/projection.js';
import { type RunSummary, runSummary } from '../events/projections/run-summary.js';
import { type RunView, runView } from './run-view.js';

interface RunEntry {
  events: AkbeEvent[];
  ids: Set<string>;
  summary: RunSummary;
}

function slim(e: AkbeEvent): AkbeEvent {
  if (e.type !== 'learner.step' || e.data.batch === undefined) return e;
  const { batch: _batch, ...data } = e.data;
  return { ...e, data };
}

export class RunIndex {
  private readonly runs = new Map<string, RunEntry>();

  /** Adds an event; false when it was already known (same dedupe id). */
  add(e: AkbeEvent): boolean {
    let entry = this.runs.get(e.meta.runId);
    if (!entry) {
      entry = { events: [], ids: new Set(), summary: runSummary.initial() };
      this.runs.set(e.meta.runId, entry);
    }
    if (entry.ids.has(e.meta.dedupeId)) return false;
    entry.ids.add(e.meta.dedupeId);
    const kept = slim(e);
    // Stream order where known (bounded reads carry meta.seq), arrival order otherwise.
    entry.events.push(kept);
    if (kept.meta.seq !== undefined)
      entry.events.sort((a, b) => (a.meta.seq ?? Infinity) - (b.meta.seq ?? Infinity));
    entry.summary = fold(runSummary, entry.events);
    return true;
  }

  /** Merges a bounded read (e.g. after NATS came back); returns the runs that changed. */
  merge(byRun: Map<string, AkbeEvent[]>): string[] {
    const changed = new Set<string>();
    for (const [runId, events] of byRun) for (const e of events) if (this.add(e)) changed.add(runId);
    return [...changed];
  }

  summaries(): RunSummary[] {
    return [...this.runs.values()].map((r) => r.summary).sort(newestFirst);
  }

  summary(runId: string): RunSummary | null {
    return this.runs.get(runId)?.summary ?? null;
  }

  view(runId: string): RunView | null {
    const entry = this.runs.get(runId);
    return entry ? runView(runId, entry.events) : null;
  }
}
