/**
 * Completeness of a run's log: what a run that did what its own events say MUST have recorded.
 * The recomputation (audit.ts) can only check events that exist; an event that was never stored,
 * silently dropped (a pre-empted dedupe id) or cut off by an export is found here instead.
 *
 * Errors (the audit fails):
 * - a step with a step.started but no learner.step, when a later step exists or the run finished
 *   (a step the run moved past without training: not "unfinished", lost);
 * - a step's question without question.assigned, group.completed or boundary.labeled; a group
 *   with fewer rollout.completed than its question.assigned.groupSize; a missing step number;
 * - a learner.step of step k without policy.published of version k+1 (when the run went on);
 * - an identity event stored twice (two learner.step for one step, ...): one of them was not
 *   written by this run's sink (a forged or replayed message), and the fold audited the first.
 * Incomplete (the audit fails too): no run.finished, i.e. the log (or export) stops early, or the
 * run is still going; `akbe replay` says which.
 */
import type { RunLog } from './run-log.js';
import { seqOf } from './run-log.js';

export interface Completeness {
  /** One line per missing or duplicated event. */
  errors: string[];
  /** Why the log is incomplete (no run.finished), or null when it ends with run.finished. */
  incomplete: string | null;
}

/** Events a crashed-and-redone rollout may repeat legitimately (its first worker's partial turns). */
const REPEATABLE = new Set(['rollout.turn', 'tool.called', 'rollout.started']);

export function checkCompleteness(log: RunLog): Completeness {
  const errors: string[] = [];
  if (!log.started) errors.push('no run.started');
  for (const d of log.duplicates)
    if (!REPEATABLE.has(d.type))
      errors.push(
        `duplicate ${d.type} at seq ${seqOf(d)} (step ${d.meta.step}): another event already holds its identity; one of them was not written by this run`,
      );
  const steps = [...log.steps.keys()];
  const last = steps.length ? Math.max(...steps) : -1;
  for (let k = 0; k <= last; k++) if (!log.steps.has(k)) errors.push(`step ${k}: no events at all`);
  const finished = log.finished !== undefined;
  for (const s of log.steps.values()) {
    const movedOn = s.step < last || finished;
    if (!s.started) errors.push(`step ${s.step}: no step.started`);
    if (!s.learner) {
      if (movedOn) errors.push(`step ${s.step}: no learner.step (the run went on without training it)`);
    } else if (movedOn && !log.published.has(s.learner.data.policyVersionAfter))
      errors.push(`step ${s.step}: no policy.published of version ${s.learner.data.policyVersionAfter}`);
    if (!movedOn && !s.learner) continue; // the step in progress when the log ends
    for (const id of s.started?.data.questionIds ?? []) {
      const q = s.questions.get(id);
      const lacks = (['assigned', 'group', 'label'] as const).filter((k) => !q?.[k]);
      if (lacks.length)
        errors.push(
          `step ${s.step} ${id}: no ${lacks.map((k) => ({ assigned: 'question.assigned', group: 'group.completed', label: 'boundary.labeled' })[k]).join(', ')}`,
        );
      const size = q?.assigned?.data.groupSize;
      const done = [...(q?.rollouts.values() ?? [])].filter((r) => r.completed).length;
      if (size && done < size.withTool + size.noTool)
        errors.push(`step ${s.step} ${id}: ${done} of ${size.withTool + size.noTool} rollout.completed`);
    }
  }
  const incomplete = finished
    ? null
    : `no run.finished: the log ends at step ${last} (${log.events} events), cut short or the run is still going`;
  return { errors, incomplete };
}
