/**
 * run-figures: what `akbe experiment report` needs of one run, folded from four event types only
 * (so a reader can fetch just their subjects, never the rollouts): the recorded config, each
 * learner step's headline metrics, the evaluations and how the run finished.
 */
import type { CategoryCounts, EvalCompletedData, RunStatus } from '../catalog.js';
import { defineProjection } from '../projection.js';

export interface StepFigures {
  step: number;
  em: number;
  tc: number;
  tp: number | null;
  meanResponseLength: number;
  categoryCounts: CategoryCounts;
  /** learner.step.extra, from logs that carry the world's oracle (null otherwise). */
  knownSearchRate: number | null;
  unknownNoSearchRate: number | null;
}

/** A run's figures for reports: per-step metrics, evaluations and how it finished. */
export interface RunFigures {
  algo: string | null;
  config: Record<string, unknown> | null;
  /** By step; a step recorded twice keeps its last record. */
  steps: Map<number, StepFigures>;
  evals: EvalCompletedData[];
  status: 'not-started' | 'running' | RunStatus;
}

export const RUN_FIGURE_TYPES = ['run.started', 'learner.step', 'eval.completed', 'run.finished'] as const;

const orNull = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? null : x);

/** The projection `akbe experiment report` reads (RunFigures). */
export const runFigures = defineProjection({
  name: 'run-figures',
  handles: RUN_FIGURE_TYPES,
  initial: (): RunFigures => ({
    algo: null,
    config: null,
    steps: new Map(),
    evals: [],
    status: 'not-started',
  }),
  evolve(s, e): RunFigures {
    switch (e.type) {
      case 'run.started':
        return { ...s, algo: e.data.algo, config: e.data.config, status: 'running' };
      case 'learner.step': {
        const m = e.data.metrics;
        s.steps.set(e.meta.step, {
          step: e.meta.step,
          em: m.em,
          tc: m.tc,
          tp: m.tp,
          meanResponseLength: m.meanResponseLength,
          categoryCounts: m.categoryCounts,
          knownSearchRate: orNull(e.data.extra.knownSearchRate),
          unknownNoSearchRate: orNull(e.data.extra.unknownNoSearchRate),
        });
        return s;
      }
      case 'eval.completed':
        s.evals.push(e.data);
        return s;
      case 'run.finished':
        return { ...s, status: e.data.status };
      default:
        return s;
    }
  },
});
