/**
 * The audit of an asynchronous run (maxStaleness η >= 1, src/rl/staleness.ts): per step, the
 * version its questions were rolled out on (step.started) must be max(0, j - η), the version it
 * trained from (learner.step.policyVersionBefore) j, learner.step.rolloutVersion the rollouts'
 * version, and the groups the learner dropped exactly those more than η versions behind
 * (re-derived with the learner's own `groupVerdict`). A synchronous run (η = 0) is not touched:
 * its checks stay those of audit.ts.
 */
import type { EventOf } from '../events/catalog.js';
import { groupVerdict } from '../machines/learner.js';
import { rolloutVersionOf, trainVersionOf } from '../rl/staleness.js';
import type { QuestionGroup } from '../rl/types.js';
import type { Mismatch } from './collector.js';
import { seqOf } from './run-log.js';

type Where = Omit<Mismatch, 'field' | 'recorded' | 'recomputed'>;
type Check = (where: Where, field: string, recorded: unknown, recomputed: unknown) => boolean;

/** Step `step`'s rollout version under the run's η: checked against step.started. */
export function checkStepVersion(
  check: Check,
  started: EventOf<'step.started'> | undefined,
  step: number,
  maxStaleness: number,
): void {
  if (maxStaleness === 0 || !started) return;
  const where = { seq: seqOf(started), eventType: started.type, step };
  check(
    where,
    'policyVersion (maxStaleness rule)',
    started.data.policyVersion,
    rolloutVersionOf(step, maxStaleness),
  );
}

/**
 * The version step `step` trained from, and the groups it trained (the others the learner must
 * have dropped: checked against learner.step.dropped and rolloutVersion).
 */
export function auditStaleness(
  check: Check,
  step: number,
  rolloutVersion: number,
  maxStaleness: number,
  groups: QuestionGroup[],
  learner: EventOf<'learner.step'> | undefined,
): { trainVersion: number; trained: QuestionGroup[] } {
  if (maxStaleness === 0) return { trainVersion: rolloutVersion, trained: groups };
  const trainVersion = trainVersionOf(step);
  const next = { step, version: trainVersion };
  const dropped = groups.filter((g) => groupVerdict(g, next, maxStaleness).reason !== null);
  if (learner) {
    const where = { seq: seqOf(learner), eventType: learner.type, step };
    check(where, 'rolloutVersion', learner.data.rolloutVersion, rolloutVersion);
    check(
      where,
      'dropped',
      (learner.data.dropped ?? []).map((d) => `${d.questionId} v${d.policyVersion} ${d.reason}`).sort(),
      dropped.map((g) => `${g.questionId} v${g.policyVersion} too-stale`).sort(),
    );
  }
  return { trainVersion, trained: groups.filter((g) => !dropped.includes(g)) };
}
