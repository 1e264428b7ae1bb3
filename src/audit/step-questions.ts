/**
 * The audit of each step's questions (step.started): distinct, and drawn from the training pool as
 * the run machine draws them, each question at one pool index across the run.
 */
import { sampleStepQuestions } from '../machines/run.js';
import type { Collector, Where } from './collector.js';
import type { AuditSettings } from './recompute.js';
import { type StepLog, seqOf } from './run-log.js';

/** Step k's questions are distinct, and each question sits at one pool index across the run. */
export function checkStepQuestions(
  c: Collector,
  s: StepLog,
  settings: AuditSettings,
  poolIndex: Map<string, { index: number; step: number }>,
): void {
  const e = s.started;
  if (!e) return;
  const where = { seq: seqOf(e), eventType: e.type, step: s.step };
  const ids = e.data.questionIds;
  c.check(where, 'questionIds (distinct)', ids.length, new Set(ids).size);
  if (settings.questionPoolSize === undefined) return;
  // The run machine draws step k's questions with sampleStepQuestions(poolSize, B, runSeed, k).
  checkPoolDraw(c, where, ids, settings, poolIndex, s.step);
}

function checkPoolDraw(
  c: Collector,
  where: Where,
  ids: readonly string[],
  settings: AuditSettings,
  poolIndex: Map<string, { index: number; step: number }>,
  step: number,
): void {
  const drawn = drawIndices(settings.questionPoolSize!, ids.length, settings.runSeed, step);
  if (!drawn) {
    c.check(where, 'questionIds.length', ids.length, `at most questionPoolSize ${settings.questionPoolSize}`);
    return;
  }
  ids.forEach((id, i) => {
    const seen = poolIndex.get(id);
    if (seen && seen.index !== drawn[i])
      c.check(
        where,
        `questionIds[${i}] pool index`,
        `${id} at ${drawn[i]}`,
        `${id} at ${seen.index} (step ${seen.step})`,
      );
    else if (!seen) poolIndex.set(id, { index: drawn[i], step });
  });
}

function drawIndices(pool: number, batch: number, seed: number, step: number): number[] | null {
  return batch > pool ? null : sampleStepQuestions(pool, batch, seed, step);
}
