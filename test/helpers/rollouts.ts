/** Hand-built scored rollouts and groups for rl and learner tests. */
import { wholeTurnSpans } from '../../src/events/upcast.js';
import type { QuestionGroup, RolloutPath, RolloutResult } from '../../src/rl/types.js';

export interface RolloutSpec {
  q?: string;
  path?: RolloutPath;
  index: number;
  reward: number;
  toolCalls?: number;
  /** Response layout: 'g' = generated token, 'o' = observation token. Default: 3 generated. */
  layout?: string;
  /** The search decisions' token spans; default: the whole generated run before each observation. */
  toolCallSpans?: Array<[number, number]>;
  prompt?: number[];
  step?: number;
  version?: number;
}

export function rollout(s: RolloutSpec): RolloutResult {
  const q = s.q ?? 'q1';
  const path = s.path ?? 'with-tool';
  const layout = s.layout ?? 'ggg';
  const base = (path === 'with-tool' ? 100 : 200) + s.index * 10;
  return {
    questionId: q,
    rolloutId: `${q}.${path === 'with-tool' ? 'wt' : 'nt'}${s.index}`,
    index: s.index,
    path,
    policyVersion: s.version ?? 0,
    seed: 1,
    promptTokens: s.prompt ?? (path === 'with-tool' ? [1, 2] : [3, 4, 5]),
    responseTokens: [...layout].map((_, j) => base + j),
    responseLogprobs: [...layout].map((c, j) => (c === 'g' ? -(j + 1) / 10 : 0)),
    responseMask: [...layout].map((c) => (c === 'g' ? 1 : 0)),
    toolCallSpans: s.toolCallSpans ?? wholeTurnSpans([...layout].map((c) => (c === 'g' ? 1 : 0))),
    segments: [],
    answer: 'x',
    toolCalls: s.toolCalls ?? 0,
    turns: 1,
    formatOk: true,
    formatReason: 'ok',
    stopReason: 'answer',
    em: s.reward === 1 ? 1 : 0,
    reward: s.reward,
  };
}

/** A group from reward lists: wt[i] / nt[i] are rewards, wtCalls[i] tool calls. */
export function group(
  q: string,
  wt: number[],
  nt: number[],
  opts: { wtCalls?: number[]; step?: number; version?: number } = {},
): QuestionGroup {
  const step = opts.step ?? 0;
  const version = opts.version ?? 0;
  return {
    questionId: q,
    step,
    policyVersion: version,
    gold: ['x'],
    withToolPrompt: [1, 2],
    withTool: wt.map((reward, index) =>
      rollout({ q, index, reward, toolCalls: opts.wtCalls?.[index] ?? 1, step, version }),
    ),
    noTool: nt.map((reward, index) => rollout({ q, index, reward, path: 'no-tool', step, version })),
  };
}
