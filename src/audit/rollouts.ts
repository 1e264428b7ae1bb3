/**
 * The audit of a step's rollouts: each finished rollout's reward, answer and format re-derived
 * from its text and the gold answers, its tokens and mask rebuilt from its turns and
 * observations, and each group.completed's rollout ids and rewards.
 */

import type { RolloutResult } from '../rl/types.js';
import type { AuditCounts, Collector } from './collector.js';
import { type AuditSettings, recomputeOutcome, responseFromTurns } from './recompute.js';
import { rolloutResultOf } from './rollout-result.js';
import { type StepLog, seqOf } from './run-log.js';

/** Rewards, answers, format, masks, tool calls and versions of every finished rollout of a step. */
export function auditRollouts(
  c: Collector,
  s: StepLog,
  version: number,
  settings: AuditSettings,
  checked: AuditCounts,
): Map<string, RolloutResult> {
  const results = new Map<string, RolloutResult>();
  for (const q of s.questions.values()) {
    const gold = q.assigned?.data.goldAnswers;
    if (!gold && q.rollouts.size)
      c.notes.add(`step ${s.step} ${q.questionId}: no question.assigned, gold answers unknown`);
    for (const r of q.rollouts.values()) {
      const done = r.completed;
      if (!done) continue;
      checked.rollouts++;
      const where = {
        seq: seqOf(done),
        eventType: done.type,
        step: s.step,
        questionId: q.questionId,
        rolloutId: r.rolloutId,
      };
      const outcome = recomputeOutcome(done, gold ?? [], settings);
      if (!outcome.fromText)
        c.notes.add('rollout.completed without segments: format flags taken as recorded');
      c.check(where, 'answer', done.data.answer, outcome.answer);
      c.check(where, 'formatOk', done.data.formatOk, outcome.formatOk);
      c.check(where, 'reward', done.data.reward, outcome.reward);
      c.check(where, 'policyVersion (on-policy)', done.meta.policyVersion, version);
      const rebuilt = responseFromTurns(r, settings.maxResponseTokens);
      if (rebuilt) {
        c.check(
          where,
          'responseTokenIds (from turns and observations)',
          done.data.responseTokenIds,
          rebuilt.tokens,
        );
        c.check(where, 'lossMask (from turns and observations)', done.data.lossMask, rebuilt.mask);
        c.check(where, 'toolCalls (tool.called events)', done.data.toolCalls, r.tools.length);
      }
      const masked = done.data.oldLogprobs.some((lp, i) => done.data.lossMask[i] === 0 && lp !== 0);
      c.check(where, 'oldLogprobs (0 on observation tokens)', masked ? 'non-zero' : 0, 0);
      const result = rolloutResultOf(done, { outcome, turns: r.turns.length });
      // Downstream (batch rows, loss tokens) uses the mask re-derived from the turns when there is one.
      if (rebuilt && rebuilt.tokens.length === result.responseTokens.length)
        result.responseMask = rebuilt.mask;
      results.set(r.rolloutId, result);
    }
    const g = q.group;
    if (!g) continue;
    const where = { seq: seqOf(g), eventType: g.type, step: s.step, questionId: q.questionId };
    for (const [key, path] of [
      ['withTool', 'with-tool'],
      ['noTool', 'no-tool'],
    ] as const) {
      const ids = g.data[key].rolloutIds;
      const present = [...q.rollouts.values()]
        .filter((r) => r.completed?.data.path === path)
        .sort((a, b) => a.completed!.data.index - b.completed!.data.index)
        .map((r) => r.rolloutId);
      c.check(where, `${key}.rolloutIds`, ids, present);
      c.check(
        where,
        `${key}.rewards`,
        g.data[key].rewards,
        ids.map((id) => results.get(id)?.reward ?? null),
      );
    }
  }
  return results;
}
