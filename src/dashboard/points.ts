/**
 * The run page's step points, shared by the server (src/dashboard/run-view.ts) and the browser
 * bundle (web/dashboard), so this file imports nothing.
 */

/** One learner step, flattened for charts. */
export interface StepPoint {
  step: number;
  policyVersion: number;
  em: number;
  noToolEm: number | null;
  tc: number;
  tp: number | null;
  /** Questions per boundary category (tool-dependent, efficiency, hallucination, both-wrong). */
  categories: Record<string, number>;
  boundaryShifts: number;
  loss: number;
  lossGrpo: number;
  lossAkbe: number;
  gradNorm: number;
  tokensPerSecond: number;
  rolloutSeconds: number;
  trainSeconds: number;
  meanResponseLength: number;
  /** Further named scalars the learner recorded (`extra`), e.g. trainReward, formatFailures. */
  extra: Record<string, number>;
}

/** Adds a point, keeping one per step (a redelivered or resumed step replaces its old point). */
export function withPoint(points: readonly StepPoint[], p: StepPoint): StepPoint[] {
  const out = points.filter((x) => x.step !== p.step);
  out.push(p);
  return out.sort((a, b) => a.step - b.step);
}
