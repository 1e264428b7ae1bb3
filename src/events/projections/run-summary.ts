/**
 * run-summary: one run at a glance (status, algorithm, steps, policy version, event counts, the
 * latest step's headline metrics). `akbe runs` (issue 7) lists runs with it.
 */
import { type CategoryCounts, EVENT_TYPES, type EventType, type RunStatus } from '../catalog.js';
import { defineProjection } from '../projection.js';

/** One run at a glance: status, algorithm, start and end, steps and the latest version (what `akbe runs` shows). */
export interface RunSummary {
  runId: string | null;
  status: 'not-started' | 'running' | RunStatus;
  algo: string | null;
  /** `meta.at` of run.started / run.finished. */
  startedAt: number | null;
  finishedAt: number | null;
  /** step.started events seen. */
  steps: number;
  lastStep: number | null;
  /** Latest policy version published. */
  policyVersion: number;
  counts: Record<EventType, number>;
  /** Headline metrics of the latest learner.step. */
  latest: {
    em: number;
    tc: number;
    tp: number | null;
    categoryCounts: CategoryCounts;
    boundaryShifts: number;
  } | null;
  reason: string | null;
}

/** The projection `akbe runs` reads (RunSummary). */
export const runSummary = defineProjection({
  name: 'run-summary',
  handles: EVENT_TYPES,
  initial: (): RunSummary => ({
    runId: null,
    status: 'not-started',
    algo: null,
    startedAt: null,
    finishedAt: null,
    steps: 0,
    lastStep: null,
    policyVersion: 0,
    counts: Object.fromEntries(EVENT_TYPES.map((t) => [t, 0])) as Record<EventType, number>,
    latest: null,
    reason: null,
  }),
  evolve(s, e): RunSummary {
    const next: RunSummary = {
      ...s,
      runId: s.runId ?? e.meta.runId,
      counts: { ...s.counts, [e.type]: s.counts[e.type] + 1 },
    };
    switch (e.type) {
      case 'run.started':
        return { ...next, status: 'running', algo: e.data.algo, startedAt: e.meta.at };
      case 'step.started':
        return { ...next, steps: s.steps + 1, lastStep: e.data.step };
      case 'learner.step': {
        const m = e.data.metrics;
        return {
          ...next,
          latest: {
            em: m.em,
            tc: m.tc,
            tp: m.tp,
            categoryCounts: m.categoryCounts,
            boundaryShifts: m.boundaryShifts,
          },
        };
      }
      case 'policy.published':
        return { ...next, policyVersion: Math.max(s.policyVersion, e.data.version) };
      case 'run.finished':
        return { ...next, status: e.data.status, finishedAt: e.meta.at, reason: e.data.reason ?? null };
      default:
        return next;
    }
  },
});
