/**
 * The rows of a training batch, by kind (src/rl/batch.ts lays them out). Every question gives its
 * with-tool rollouts as rows of L_GRPO; an algorithm's registered row kinds (Algorithm.rowKinds)
 * add the rest, each for one question, in the order the algorithm names them:
 *
 *   akbe-target     the boundary label's target in L_AKBE: the with-tool row it is marked on, or
 *                   a row of its own for a no-tool target (re-conditioned or under its own prompt)
 *   dpo-pair        the same target rows, as the chosen side of the question's DPO pair whose
 *                   rejected side is BatchQuestion.rejected (L_DPO replaces L_AKBE: akbeWeight 0)
 *   offline-target  the question's target built once from a frozen checkpoint (BatchQuestion.offline),
 *                   its own row after the with-tool rows
 *
 * A kind says which of the trainer's fixed loss inputs its rows feed (akbeWeight or dpoPairs): the
 * train request's layout is the same for every algorithm, so a new kind fills those arrays rather
 * than adding one. Registering a kind is how a plugin algorithm trains other rows.
 */
import { RolloutShapeError } from './errors.js';
import type { OfflineTargetSequence } from './offline.js';
import { NamedRegistry } from './registry.js';
import type { BoundaryLabel, QuestionGroup, RolloutPath, RolloutResult } from './types.js';

/** One question of a step as the batch takes it: its group, label, advantages and what its row kinds read. */
export interface BatchQuestion {
  group: QuestionGroup;
  label: BoundaryLabel | null;
  /** GRPO advantages of group.withTool, in the same order. */
  advantages: readonly number[];
  /** dpo-pair rows: the rolloutId of the question's rejected with-tool rollout (src/rl/dpo.ts), or null. */
  rejected?: string | null;
  /**
   * offline-target rows: the question's target constructed once from the frozen checkpoint's
   * rollouts (src/rl/offline.ts), or null when its frozen rollouts gave none. It is its own row
   * (GRPO weight 0) with recomputeOld 1: its logprobs are the frozen policy's, not pi_old's.
   */
  offline?: OfflineTargetSequence | null;
}

/** Where a batch row comes from: its question, rollout, path, prompt context and lengths. */
export interface BatchRow {
  questionId: string;
  rolloutId: string;
  path: RolloutPath;
  /** The prompt the row's response is conditioned on. */
  context: RolloutPath;
  promptLength: number;
  /** Prompt + response tokens (before padding). */
  length: number;
}

/** What a row takes from its rollout (an on-policy RolloutResult or an offline target). */
export type RowSequence = Pick<
  RolloutResult,
  'rolloutId' | 'responseTokens' | 'responseLogprobs' | 'responseMask'
>;

/** One row before padding: what assembleBatch writes into the batch's arrays. */
export interface QuestionRow {
  info: BatchRow;
  prompt: readonly number[];
  rollout: RowSequence;
  /** Use the rollout's recorded logprobs as pi_old. */
  oldValid: boolean;
  advantage: number;
  /** In L_GRPO (pgWeight 1). */
  grpo: boolean;
  /** An AKBE target: weighted in L_AKBE, or the chosen side of a DPO pair. */
  target: boolean;
}

/** What a row kind registers: the rows it adds to a question and the loss input they feed. */
export interface RowKind {
  description: string;
  /**
   * Adds the kind's rows of question `q` to `rows` (its with-tool rows, then earlier kinds'), or
   * marks one of them as a target. Throws a RolloutShapeError when the question cannot give them.
   */
  addRows(q: BatchQuestion, rows: QuestionRow[]): void;
  /** Its target rows are weighted in L_AKBE (akbeWeight, by the batch's akbeAggregation). */
  akbeWeighted?: boolean;
  /**
   * The question's DPO pair as indices into its `rows`, or null when it has none. A kind with this
   * gives the batch its dpoPairs (each weighted 1 / pairs of its mini-batch).
   */
  pair?(q: BatchQuestion, rows: readonly QuestionRow[]): { chosen: number; rejected: number } | null;
}

const ROW_KINDS = new NamedRegistry<RowKind>('row kind');
/** Registers a row kind under `name` (an algorithm's `rowKinds` names it). */
export const registerRowKind = (name: string, kind: RowKind): void => ROW_KINDS.register(name, kind);
/** The row kind registered under `name`; throws naming the registered ones. */
export const getRowKind = (name: string): RowKind => ROW_KINDS.get(name);
/** The names of every registered row kind. */
export const listRowKinds = (): string[] => ROW_KINDS.names();

/** Throws unless a sequence has one logprob and one mask entry per response token. */
export function checkShape(r: RowSequence): void {
  const n = r.responseTokens.length;
  if (r.responseLogprobs.length !== n || r.responseMask.length !== n) {
    throw new RolloutShapeError(
      r.rolloutId,
      `rollout ${r.rolloutId}: ${n} response tokens but ${r.responseLogprobs.length} logprobs and ${r.responseMask.length} mask entries`,
    );
  }
}

/** A question's rows: its with-tool rollouts (L_GRPO), then each kind's, in order. */
export function questionRows(q: BatchQuestion, kinds: readonly RowKind[]): QuestionRow[] {
  const { group } = q;
  if (q.advantages.length !== group.withTool.length) {
    throw new RolloutShapeError(
      undefined,
      `question ${group.questionId}: ${q.advantages.length} advantages for ${group.withTool.length} with-tool rollouts`,
    );
  }
  const rows: QuestionRow[] = group.withTool.map((r, i) => {
    checkShape(r);
    return {
      info: {
        questionId: group.questionId,
        rolloutId: r.rolloutId,
        path: r.path,
        context: 'with-tool',
        promptLength: r.promptTokens.length,
        length: r.promptTokens.length + r.responseTokens.length,
      },
      prompt: r.promptTokens,
      rollout: r,
      oldValid: true,
      advantage: q.advantages[i],
      grpo: true,
      target: false,
    };
  });
  for (const kind of kinds) kind.addRows(q, rows);
  return rows;
}

/**
 * The label's target: marked on its with-tool row, or a row of its own (a no-tool target). Under
 * context `with-tool` a no-tool target is re-conditioned on the with-tool prompt, so its recorded
 * logprobs are not pi_old of that sequence (recomputeOld 1, see batch.ts).
 */
function addLabelTarget(q: BatchQuestion, rows: QuestionRow[]): void {
  const { group } = q;
  const target = q.label?.target ?? null;
  if (!target) return;
  const marked = rows.filter((x) => x.grpo && x.info.rolloutId === target.rolloutId);
  for (const row of marked) row.target = true;
  if (target.path !== 'no-tool') {
    if (marked.length === 0)
      throw new RolloutShapeError(
        target.rolloutId,
        `question ${group.questionId}: target ${target.rolloutId} is not among its with-tool rollouts`,
      );
    return;
  }
  const r = group.noTool.find((x) => x.rolloutId === target.rolloutId);
  if (!r)
    throw new RolloutShapeError(
      target.rolloutId,
      `question ${group.questionId}: target ${target.rolloutId} is not among its no-tool rollouts`,
    );
  checkShape(r);
  const prompt = target.context === 'with-tool' ? group.withToolPrompt : r.promptTokens;
  rows.push({
    info: {
      questionId: group.questionId,
      rolloutId: r.rolloutId,
      path: 'no-tool',
      context: target.context,
      promptLength: prompt.length,
      length: prompt.length + r.responseTokens.length,
    },
    prompt,
    rollout: r,
    oldValid: target.context === 'no-tool',
    advantage: 0,
    grpo: false,
    target: true,
  });
}

/** The row of an offline target: its recorded prompt and response, never in L_GRPO, pi_old recomputed. */
function addOfflineTarget(q: BatchQuestion, rows: QuestionRow[]): void {
  const t = q.offline;
  if (!t) return;
  const questionId = q.group.questionId;
  checkShape(t);
  if (t.responseTokens.length === 0)
    throw new RolloutShapeError(
      t.rolloutId,
      `question ${questionId}: offline target ${t.rolloutId} is empty`,
    );
  rows.push({
    info: {
      questionId,
      rolloutId: t.rolloutId,
      path: t.path,
      context: t.context,
      promptLength: t.promptTokens.length,
      length: t.promptTokens.length + t.responseTokens.length,
    },
    prompt: t.promptTokens,
    rollout: t,
    oldValid: false,
    advantage: 0,
    grpo: false,
    target: true,
  });
}

/** The question's DPO pair: its target row (chosen) and its rejected with-tool rollout. */
function dpoPairOf(q: BatchQuestion, rows: readonly QuestionRow[]) {
  if (!q.rejected) return null;
  const chosen = rows.findIndex((r) => r.target);
  const rejected = rows.findIndex((r) => r.grpo && r.info.rolloutId === q.rejected);
  if (chosen < 0 || rejected < 0 || chosen === rejected)
    throw new RolloutShapeError(
      q.rejected,
      `question ${q.group.questionId}: DPO pair needs its target and a distinct with-tool rollout ${q.rejected}`,
    );
  return { chosen, rejected };
}

registerRowKind('akbe-target', {
  description: "the boundary label's target, weighted in L_AKBE",
  addRows: addLabelTarget,
  akbeWeighted: true,
});
registerRowKind('dpo-pair', {
  description: "the boundary label's target as the chosen side of a DPO pair (akbeWeight 0)",
  addRows: addLabelTarget,
  pair: dpoPairOf,
});
registerRowKind('offline-target', {
  description: "the question's target built once from a frozen checkpoint, weighted in L_AKBE",
  addRows: addOfflineTarget,
  akbeWeighted: true,
});
