/**
 * A learner step as the CLI prints it: the step's metrics from learner.step plus the orchestrator's
 * timing (step-timing.ts), and its one-line form.
 */
import type { AkbeFact } from '../../machines/facts.js';
import type { BoundaryCategory } from '../../rl/types.js';
import type { StepTiming } from './step-timing.js';

export interface StepReport {
  step: number;
  policyVersion: number;
  em: number;
  noToolEm: number;
  tc: number;
  tp: number | null;
  categories: Record<BoundaryCategory, number>;
  boundaryShifts: number;
  tokensPerSecond: number;
  rolloutSeconds: number;
  trainSeconds: number;
  loss: number;
}

export function stepReport(
  fact: Extract<AkbeFact, { type: 'learner.step' }>,
  t: StepTiming | undefined,
): StepReport {
  const s = fact.stepMetrics;
  return {
    step: fact.step,
    policyVersion: fact.policyVersion,
    em: s.withToolEm,
    noToolEm: s.noToolEm,
    tc: s.meanToolCalls,
    tp: s.meanToolCalls > 0 ? s.withToolEm / s.meanToolCalls : null,
    categories: { ...s.categories },
    boundaryShifts: s.boundaryShifts,
    tokensPerSecond: t?.tokensPerSecond ?? 0,
    rolloutSeconds: t?.rolloutSeconds ?? 0,
    trainSeconds: t?.trainSeconds ?? 0,
    loss: fact.trainMetrics.loss ?? 0,
  };
}

/** One line per step: `step 1 v1  EM 0.312 (nt 0.250)  TC 1.20  TP 0.26  td/eff/hal/bw 3/2/1/2  shifts 2  ...`. */
export function formatStepLine(r: StepReport): string {
  const c = r.categories;
  const f = (x: number | null, d = 3) => (x === null ? '-' : x.toFixed(d));
  return (
    `step ${r.step} v${r.policyVersion}  EM ${f(r.em)} (no-tool ${f(r.noToolEm)})  TC ${f(r.tc, 2)}  TP ${f(r.tp)}  ` +
    `tool-dep/eff/halluc/both-wrong ${c['tool-dependent']}/${c.efficiency}/${c.hallucination}/${c['both-wrong']}  ` +
    `shifts ${r.boundaryShifts}  ${Math.round(r.tokensPerSecond)} tok/s  rollout ${r.rolloutSeconds.toFixed(1)}s  train ${r.trainSeconds.toFixed(1)}s  loss ${f(r.loss, 4)}`
  );
}
