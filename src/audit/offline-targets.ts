/**
 * The audit of offline-akbe's records (src/rl/offline.ts) on question.assigned: each question's
 * record is the same on every step that draws it (built once), each frozen rollout's reward is
 * what its recorded answer and format earn against the question's gold answers, the label and
 * target pick are re-derived from the summaries (`offlineLabel`, with the recomputed rewards), and
 * the target's sequence is the picked rollout's (path, context, generated-token count). The
 * records then feed the learner's pure step (audit.ts), which re-derives every batch row.
 * The target's tokens and logprobs are taken as recorded: regenerating them needs the frozen
 * checkpoint, whose sha256 the record names.
 */
import { frozenReward, type OfflineTarget, offlineLabel } from '../rl/offline.js';
import type { AuditSettings } from './recompute.js';
import { type RunLog, type StepLog, seqOf } from './run-log.js';

type Check = (
  where: { seq: number; eventType: string; step: number; questionId: string },
  field: string,
  recorded: unknown,
  recomputed: unknown,
) => boolean;

/** The step's records by question (for prepareStep), after checking them. */
export function checkOfflineTargets(
  check: Check,
  s: StepLog,
  settings: AuditSettings,
  firstSeen: Map<string, { step: number; record: OfflineTarget }>,
): Record<string, OfflineTarget> {
  const out: Record<string, OfflineTarget> = {};
  for (const q of s.questions.values()) {
    const e = q.assigned;
    if (!e) continue;
    const where = { seq: seqOf(e), eventType: e.type, step: s.step, questionId: q.questionId };
    const rec = e.data.offline;
    if (!rec) {
      check(where, 'offline', null, 'the offline target record (offline-akbe)');
      continue;
    }
    out[q.questionId] = rec;
    const first = firstSeen.get(q.questionId);
    if (first) {
      check(where, 'offline (built once)', JSON.stringify(rec), JSON.stringify(first.record));
      continue;
    }
    firstSeen.set(q.questionId, { step: s.step, record: rec });
    const rewards = rec.rollouts.map((r) => frozenReward(r, e.data.goldAnswers));
    rec.rollouts.forEach((r, i) => {
      check(where, `offline.rollouts[${i}].reward`, r.reward, rewards[i]);
    });
    const label = offlineLabel(
      q.questionId,
      rec.rollouts.map((r, i) => ({ ...r, reward: rewards[i] })),
      settings,
    );
    check(where, 'offline.label.wt', rec.label.wt, label.wt);
    check(where, 'offline.label.nt', rec.label.nt, label.nt);
    check(where, 'offline.label.category', rec.label.category, label.category);
    check(where, 'offline.label.targetRolloutId', rec.label.targetRolloutId, label.target?.rolloutId ?? null);
    check(where, 'offline.label.tieBreakSeed', rec.label.tieBreakSeed, label.tieBreakSeed);
    const t = rec.target;
    if (!t || !label.target) continue;
    check(where, 'offline.target.path', t.path, label.target.path);
    check(where, 'offline.target.context', t.context, label.target.context);
    const picked = rec.rollouts.find((r) => r.rolloutId === t.rolloutId);
    const generated = t.responseMask.reduce((a, m) => a + m, 0);
    check(where, 'offline.target generated tokens', generated, picked?.generated ?? null);
  }
  return out;
}

/** Each question's first recorded offline record (the machines' re-play feeds them to the learner). */
export function recordedOfflineTargets(log: RunLog): Record<string, OfflineTarget> {
  const out: Record<string, OfflineTarget> = {};
  for (const s of log.steps.values())
    for (const q of s.questions.values()) {
      const rec = q.assigned?.data.offline;
      if (rec && !(q.questionId in out)) out[q.questionId] = rec;
    }
  return out;
}
