/**
 * One run's whole log for the pages that need more than the run-level events (a question's
 * transcripts, the audit): a bounded read folded into the audit's RunLog. Logs written without
 * `rollout.completed.segments` get their texts decoded from the token ids with the run's world
 * tokenizer when it is on this machine, as `akbe replay` does.
 */

import { configOf } from '../audit/recompute.js';
import { foldRunLog, type RunLog } from '../audit/run-log.js';
import { fillSegments } from '../audit/segments.js';
import type { BoundaryCategory } from '../events/catalog.js';
import { readWorldTokenizer } from '../world/files.js';
import type { DashboardSource } from './source.js';

export class DashboardNotFoundError extends Error {
  constructor(readonly what: string) {
    super(`not found: ${what}`);
    this.name = 'DashboardNotFoundError';
  }
}

export async function readRunLog(source: DashboardSource, runId: string): Promise<RunLog> {
  const events = await source.runEvents(runId);
  if (events.length === 0) throw new DashboardNotFoundError(`run ${runId}`);
  const log = foldRunLog(events);
  const missing = [...log.steps.values()].some((s) =>
    [...s.questions.values()].some((q) =>
      [...q.rollouts.values()].some((r) => r.completed && !r.completed.data.segments),
    ),
  );
  if (missing) {
    const worldDir = configOf(log.started).worldDir;
    if (typeof worldDir === 'string') {
      try {
        const tok = await readWorldTokenizer(worldDir);
        fillSegments(log, (ids) => tok.decode(ids));
      } catch {
        // No tokenizer here: those transcripts show as "not recorded".
      }
    }
  }
  return log;
}

export interface QuestionListRow {
  questionId: string;
  /** Steps the question was rolled out in. */
  steps: number;
  /** Its latest boundary category, and how often it changed. */
  category: BoundaryCategory | null;
  shifts: number;
}

export function questionList(log: RunLog): QuestionListRow[] {
  const rows = new Map<string, QuestionListRow>();
  for (const s of log.steps.values())
    for (const q of s.questions.values()) {
      const row = rows.get(q.questionId) ?? { questionId: q.questionId, steps: 0, category: null, shifts: 0 };
      const category = q.label?.data.category ?? null;
      if (category !== null && row.category !== null && category !== row.category) row.shifts++;
      row.steps++;
      row.category = category ?? row.category;
      rows.set(q.questionId, row);
    }
  return [...rows.values()];
}
