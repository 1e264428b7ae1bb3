/**
 * The dashboard's question page: a question's boundary history across a run (src/audit/history.ts)
 * and, for each step it was rolled out in, its rollouts as readable transcripts, the boundary
 * target marked. Pure: a RunLog in, plain JSON out.
 *
 * A transcript is the response cut into the tag grammar's blocks (think / search / information /
 * answer). The cut is for reading, not judging: text outside any block, or a block left open,
 * shows as it is (kind 'text'); whether the response was well formed is the recorded `formatOk`.
 */

import { type BoundaryHistoryRow, boundaryHistory } from '../audit/history.js';
import type { RunLog } from '../audit/run-log.js';
import type { BoundaryCategory, ResponseSegment } from '../events/catalog.js';

export type BlockKind = 'think' | 'search' | 'information' | 'answer' | 'text';

export interface TranscriptBlock {
  kind: BlockKind;
  text: string;
}

export interface RolloutTranscript {
  rolloutId: string;
  path: 'with-tool' | 'no-tool';
  index: number;
  reward: number;
  formatOk: boolean;
  answer: string | null;
  toolCalls: number;
  stopReason: string;
  /** Stream sequence of rollout.completed. */
  seq: number;
  /** This rollout is the step's boundary target y*. */
  target: boolean;
  /** Null when neither segments nor turn texts were recorded (see docs/inspector.md). */
  blocks: TranscriptBlock[] | null;
}

export interface QuestionStep {
  step: number;
  policyVersion: number;
  category: BoundaryCategory | null;
  targetRolloutId: string | null;
  rollouts: RolloutTranscript[];
}

export interface QuestionView {
  runId: string | null;
  questionId: string;
  text: string | null;
  goldAnswers: string[];
  split: string | null;
  history: BoundaryHistoryRow[];
  steps: QuestionStep[];
}

const TAG = /<(\/?)(think|search|information|answer)>/g;

/** Cuts response text into blocks; unbalanced tags and loose text come out as 'text'. */
export function transcriptBlocks(segments: readonly ResponseSegment[]): TranscriptBlock[] {
  const text = segments.map((s) => s.text).join('');
  const out: TranscriptBlock[] = [];
  const push = (kind: BlockKind, t: string) => {
    const trimmed = t.trim();
    if (trimmed !== '') out.push({ kind, text: trimmed });
  };
  let open: { kind: BlockKind; from: number; at: number } | null = null;
  let last = 0;
  for (const m of text.matchAll(TAG)) {
    const [whole, slash, name] = m;
    const at = m.index ?? 0;
    if (!slash && !open) {
      push('text', text.slice(last, at));
      open = { kind: name as BlockKind, from: at + whole.length, at };
    } else if (slash && open && open.kind === name) {
      push(open.kind, text.slice(open.from, at));
      open = null;
      last = at + whole.length;
    }
  }
  if (open) push('text', text.slice(open.at));
  else push('text', text.slice(last));
  return out;
}

export function questionView(log: RunLog, questionId: string): QuestionView | null {
  const history = boundaryHistory(log, questionId);
  if (history.length === 0) return null;
  let assigned = null as null | { text: string; goldAnswers: string[]; split: string };
  const steps: QuestionStep[] = [];
  for (const s of log.steps.values()) {
    const q = s.questions.get(questionId);
    if (!q) continue;
    assigned ??= q.assigned?.data ?? null;
    const targetRolloutId = q.label?.data.targetRolloutId ?? null;
    const rollouts: RolloutTranscript[] = [];
    for (const r of q.rollouts.values()) {
      const d = r.completed?.data;
      if (!d) continue;
      rollouts.push({
        rolloutId: r.rolloutId,
        path: d.path,
        index: d.index,
        reward: d.reward,
        formatOk: d.formatOk,
        answer: d.answer,
        toolCalls: d.toolCalls,
        stopReason: d.stopReason,
        seq: r.completed?.meta.seq ?? 0,
        target: r.rolloutId === targetRolloutId,
        blocks: d.segments ? transcriptBlocks(d.segments) : null,
      });
    }
    // With-tool first, then no-tool, each by index: the order of group.completed.
    rollouts.sort((a, b) => (a.path === b.path ? a.index - b.index : a.path === 'with-tool' ? -1 : 1));
    const row = history.find((h) => h.step === s.step);
    steps.push({
      step: s.step,
      policyVersion: row?.policyVersion ?? s.step,
      category: row?.category ?? null,
      targetRolloutId,
      rollouts,
    });
  }
  return {
    runId: log.runId,
    questionId,
    text: assigned?.text ?? null,
    goldAnswers: assigned?.goldAnswers ?? [],
    split: assigned?.split ?? null,
    history,
    steps,
  };
}
