/**
 * What the dashboard's run page draws, folded from a run's run-level events (run.started,
 * step.started, learner.step, policy.published, run.finished): the run-summary projection, the
 * config, and one point per learner step. Pure, and fed one event at a time, so the server builds a
 * page from a bounded read and the browser extends it from the live pushes with the same `stepPoint`.
 */
import type { AkbeEvent, EventOf } from '../events/catalog.js';
import { BOUNDARY_CATEGORIES } from '../events/catalog.js';
import { fold } from '../events/projection.js';
import { type RunSummary, runSummary } from '../events/projections/run-summary.js';
import { type StepPoint, withPoint } from './points.js';

export type { StepPoint };

export interface RunView {
  runId: string;
  summary: RunSummary;
  /** run.started's data (config, seeds, world and policy refs), null before it is seen. */
  started: EventOf<'run.started'>['data'] | null;
  /** One point per learner step, by step number, each step once. */
  points: StepPoint[];
}

export function stepPoint(e: EventOf<'learner.step'>): StepPoint {
  const m = e.data.metrics;
  const { noToolEm, ...extra } = e.data.extra;
  return {
    step: e.meta.step,
    policyVersion: e.data.policyVersionAfter,
    em: m.em,
    noToolEm: Number.isFinite(noToolEm) ? noToolEm : null,
    tc: m.tc,
    tp: m.tp,
    categories: Object.fromEntries(BOUNDARY_CATEGORIES.map((c) => [c, m.categoryCounts[c] ?? 0])),
    boundaryShifts: m.boundaryShifts,
    loss: m.loss,
    lossGrpo: m.lossGrpo,
    lossAkbe: m.lossAkbe,
    gradNorm: m.gradNorm,
    tokensPerSecond: m.tokensPerSecond,
    rolloutSeconds: m.rolloutSeconds,
    trainSeconds: m.trainSeconds,
    meanResponseLength: m.meanResponseLength,
    extra,
  };
}

export function runView(runId: string, events: readonly AkbeEvent[]): RunView {
  let points: StepPoint[] = [];
  let started: RunView['started'] = null;
  for (const e of events) {
    if (e.type === 'learner.step') points = withPoint(points, stepPoint(e));
    else if (e.type === 'run.started') started ??= e.data;
  }
  return { runId, summary: fold(runSummary, events), started, points };
}
