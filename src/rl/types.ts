/**
 * Shared types of the pure algorithm: trajectories as the rollout machine produces them, scored
 * rollouts, groups, boundary labels. Token-in/token-out: a trajectory keeps the ids the policy
 * produced and the ids of the observations the environment inserted, never re-tokenized text.
 */

/** The two rollout paths of AKBE's dual-path probe. */
export const ROLLOUT_PATHS = ['with-tool', 'no-tool'] as const;
/** Which of a question's two rollout groups: with the search tool, or without (the knowledge probe). */
export type RolloutPath = (typeof ROLLOUT_PATHS)[number];

/**
 * Why a rollout ended.
 * - `answer`: the policy closed an `<answer>` block (the only way to a well-formed trajectory);
 * - `eos`: the policy stopped (EOS) without an answer;
 * - `length`: the response reached `maxResponseTokens` (generated + observation tokens);
 * - `tool-limit`: the policy asked for one search more than `maxToolCalls` (not executed);
 * - `invalid-action`: the text so far breaks the tag grammar (text outside blocks, a search on the
 *   no-tool path, a self-written `<information>` block, ...).
 */
export const STOP_REASONS = ['answer', 'eos', 'length', 'tool-limit', 'invalid-action'] as const;
/** Why a rollout ended. */
export type StopReason = (typeof STOP_REASONS)[number];

/** What a turn ended with, as rollout.turn records it ('think': no action, EOS or the length limit). */
export const TURN_ACTIONS = ['think', 'search', 'answer', 'invalid'] as const;
/** What a turn of a rollout did, by the tag it closed with. */
export type TurnActionKind = (typeof TURN_ACTIONS)[number];

/** A piece of a response's text: written by the policy, or inserted by the environment. */
export interface TextSegment {
  kind: 'generated' | 'observation';
  text: string;
}

/** What the rollout machine outputs: one finished trajectory, before scoring. */
export interface Trajectory {
  questionId: string;
  rolloutId: string;
  /** Position within its path's group (0..G-1); orders candidates deterministically. */
  index: number;
  path: RolloutPath;
  /** The policy version that generated every token of this trajectory. */
  policyVersion: number;
  /** Seed of this rollout's sampling; per-turn seeds derive from it. */
  seed: number;
  promptTokens: number[];
  /** Generated and observation ids after the prompt, in order. [R] */
  responseTokens: number[];
  /** log pi_old(token) for generated ids, 0 for observation ids. [R] */
  responseLogprobs: number[];
  /** 1 for generated ids, 0 for observation ids (masked out of every loss). [R] */
  responseMask: number[];
  /**
   * One [start, end) per search decision (every turn that ended in a tool call, executed or
   * refused by the tool-call limit), in order: the tokens of the call's query (of the whole call
   * when the query is empty), as indices into responseTokens. beta-GRPO's confidence is the
   * minimum probability over each. [C][2]
   */
  toolCallSpans: Array<[number, number]>;
  /** The response text, by segment; `checkFormat` reads it. */
  segments: TextSegment[];
  /** Content of the last `<answer>` block, stripped; null when there is none. */
  answer: string | null;
  /** Searches executed (a search refused by the tool-call limit is not counted). */
  toolCalls: number;
  /** Generate calls made. */
  turns: number;
  formatOk: boolean;
  /** 'ok' or the format failure's code (see `FormatReason`). */
  formatReason: string;
  stopReason: StopReason;
}

/** A trajectory with its outcome reward. */
export interface RolloutResult extends Trajectory {
  /** Exact match of the answer against any gold answer (0 when the format failed). */
  em: 0 | 1;
  /** Outcome reward: EM when the format is ok, else 0 (Search-R1's binary reward). */
  reward: number;
}

/** Every rollout of one question in one step: what the learner needs for that question. */
export interface QuestionGroup {
  questionId: string;
  step: number;
  policyVersion: number;
  gold: string[];
  /** The with-tool prompt of the question: a no-tool target with context `with-tool` is re-conditioned on it. */
  withToolPrompt: number[];
  withTool: RolloutResult[];
  noTool: RolloutResult[];
}

/** The four knowledge-boundary categories of the paper (WT, NT). */
export const BOUNDARY_CATEGORIES = ['tool-dependent', 'efficiency', 'hallucination', 'both-wrong'] as const;
/** A question's knowledge-boundary category (the paper's Table 1), from the outcomes of its two paths. */
export type BoundaryCategory = (typeof BOUNDARY_CATEGORIES)[number];
/** Questions per boundary category (a step's or a run's). */
export type CategoryCounts = Record<BoundaryCategory, number>;

/** The category of a question from its two path outcomes (WT: any with-tool correct, NT: any no-tool correct). */
export function categoryOf(wt: boolean, nt: boolean): BoundaryCategory {
  if (wt) return nt ? 'efficiency' : 'tool-dependent';
  return nt ? 'hallucination' : 'both-wrong';
}

/** How the AKBE target is chosen among a question's correct trajectories. */
export type TargetSelection = 'min-tool-calls' | 'shortest';
/** Whose prompt an AKBE target is trained under: the with-tool prompt, or the trajectory's own. */
export type TargetContext = 'with-tool' | 'own';

/** The selected AKBE target of a question: which rollout, and under which prompt it is scored. */
export interface BoundaryTarget {
  rolloutId: string;
  path: RolloutPath;
  /** The prompt the target is conditioned on for the AKBE loss. */
  context: RolloutPath;
  /** Number of candidates the target was drawn from (ties included). */
  candidates: number;
}

/** One question's boundary label: its category, the outcomes behind it and the chosen target. */
export interface BoundaryLabel {
  questionId: string;
  /** Any with-tool rollout correct. */
  wt: boolean;
  /** Any no-tool rollout correct. */
  nt: boolean;
  category: BoundaryCategory;
  target: BoundaryTarget | null;
  /** Seed of the tie-break Rng (recorded so that a replay recomputes the same pick). */
  tieBreakSeed: number;
}
