/**
 * Re-derivation from the log alone: the run's settings from run.started, each rollout's outcome
 * (answer, format, reward) from its recorded text and the question's gold answers, and each
 * question's group as the learner saw it. Pure: src/rl does the math, this file only reads events.
 */
import type { EventOf } from '../events/catalog.js';
import { algorithmOptions, getAlgorithm, listAlgorithms } from '../rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG } from '../rl/config.js';
import { AKBE_AGGREGATIONS, type AkbeAggregation } from '../rl/losses.js';
import type { ToolCallCount } from '../rl/metrics.js';
import { exactMatch, scoreTrajectory } from '../rl/reward.js';
import type { QuestionGroup, RolloutResult, TargetContext, TargetSelection } from '../rl/types.js';
import { type RequestSettings, requestSettingsOf } from './rebuilt-request.js';
import type { RolloutOutcome } from './rollout-result.js';
import type { QuestionLog, RolloutLog, RunLog } from './run-log.js';

/** The settings the learner computed with, read from run.started (defaults noted when missing). */
export interface AuditSettings {
  runSeed: number;
  /** The algorithm (src/rl/algorithms) and its options, as the learner ran them. */
  algo: string;
  algoOptions: Record<string, number>;
  advantage: string;
  targetSelection: TargetSelection;
  targetContext: TargetContext;
  /** L_AKBE's aggregation; a log without it trained 'pooled' (akbe before session 3). */
  akbeAggregation: AkbeAggregation;
  maxToolCalls: number;
  /** How the run's TC counted tool calls; a log without it counted executed calls only (before session 3). */
  toolCallCount: ToolCallCount;
  /** Tags of the run's tools (run.started config `toolTags`; absent: the default search tool). */
  toolTags?: string[];
  maxResponseTokens: number;
  miniBatchQuestions: number;
  padId?: number;
  padTo?: number;
  questionPoolSize?: number;
  /** η of an asynchronous run (absent from logs before issue 13: 0, synchronous). */
  maxStaleness: number;
  /** Keys that were missing from run.started and took the audit's default. */
  defaulted: string[];
  /** What a train request carries beyond its batch (rebuilt-request.ts), or why the log cannot say. */
  request: RequestSettings;
}

const DEFAULTS = DEFAULT_TRAIN_CONFIG;

/**
 * The one name run.started wrote before it recorded the registered name itself (runs before
 * session 9 spelled `akbe` this way). A name neither registered nor listed here is returned as
 * it is, so the audit fails naming it and the registered ones (a plugin that was not loaded)
 * rather than auditing it as some other algorithm.
 */
const OLD_SPELLINGS: Readonly<Record<string, string>> = { 'grpo+akbe': 'akbe' };

/** The registered algorithm a recorded name means. */
export function learnerAlgo(name: string): string {
  if (listAlgorithms().includes(name)) return name;
  return OLD_SPELLINGS[name] ?? name;
}

/** run.started.config with flat TrainConfig keys; a nested `train` section fills what the top lacks. */
export function configOf(started: EventOf<'run.started'> | undefined): Record<string, unknown> {
  const raw = (started?.data.config ?? {}) as Record<string, unknown>;
  const nested = raw.train && typeof raw.train === 'object' ? (raw.train as Record<string, unknown>) : {};
  return { ...nested, ...raw };
}

export function settingsOf(started: EventOf<'run.started'> | undefined): AuditSettings {
  const cfg = configOf(started);
  const defaulted: string[] = [];
  const pick = <T>(key: string, ok: (v: unknown) => boolean, fallback: T): T => {
    if (ok(cfg[key])) return cfg[key] as T;
    defaulted.push(key);
    return fallback;
  };
  const isInt = (v: unknown) => Number.isInteger(v);
  const isStr = (v: unknown) => typeof v === 'string';
  const runSeed = started?.data.seeds.run ?? (isInt(cfg.seed) ? (cfg.seed as number) : 0);
  if (started?.data.seeds.run === undefined) defaulted.push('seeds.run');
  const algo = isStr(cfg.algo)
    ? learnerAlgo(cfg.algo as string)
    : learnerAlgo(started?.data.algo ?? DEFAULTS.algo);
  const given = cfg.algoOptions && typeof cfg.algoOptions === 'object' ? cfg.algoOptions : {};
  return {
    runSeed,
    algo,
    algoOptions: algorithmOptions(getAlgorithm(algo), given as Record<string, unknown>),
    advantage: pick('advantage', isStr, DEFAULTS.advantage),
    targetSelection: pick(
      'targetSelection',
      (v) => v === 'min-tool-calls' || v === 'shortest',
      DEFAULTS.targetSelection,
    ),
    targetContext: pick('targetContext', (v) => v === 'with-tool' || v === 'own', DEFAULTS.targetContext),
    akbeAggregation: pick<AkbeAggregation>(
      'akbeAggregation',
      (v) => AKBE_AGGREGATIONS.includes(v as AkbeAggregation),
      'pooled',
    ),
    maxToolCalls: pick('maxToolCalls', isInt, DEFAULTS.maxToolCalls),
    toolCallCount: cfg.toolCallCount === 'emitted' ? 'emitted' : 'executed',
    toolTags:
      Array.isArray(cfg.toolTags) && cfg.toolTags.every(isStr) ? (cfg.toolTags as string[]) : undefined,
    maxResponseTokens: pick('maxResponseTokens', isInt, DEFAULTS.maxResponseTokens),
    miniBatchQuestions: pick('miniBatchQuestions', isInt, DEFAULTS.miniBatchQuestions),
    padId: isInt(cfg.padId) ? (cfg.padId as number) : undefined,
    padTo: isInt(cfg.padTo) ? (cfg.padTo as number) : undefined,
    questionPoolSize:
      started?.data.questionPoolSize ??
      (isInt(cfg.questionPoolSize) ? (cfg.questionPoolSize as number) : undefined),
    maxStaleness:
      isInt(cfg.maxStaleness) && (cfg.maxStaleness as number) > 0 ? (cfg.maxStaleness as number) : 0,
    defaulted,
    request: requestSettingsOf(cfg, algo, isInt(cfg.padId) ? (cfg.padId as number) : undefined),
  };
}

export interface RecomputedOutcome extends RolloutOutcome {
  /** True when the format was re-checked from recorded segments (else the recorded flag was trusted). */
  fromText: boolean;
}

/**
 * The outcome of a finished rollout, exactly as the rollout machine scores it: with the response
 * text, `scoreTrajectory` (tag grammar, last <answer>, Search-R1 EM against any gold answer), and a
 * format failure unless the rollout stopped on its answer. Without the text, the recorded answer
 * and format flag are taken as given and only the EM is recomputed.
 */
export function recomputeOutcome(
  done: EventOf<'rollout.completed'>,
  gold: readonly string[],
  s: Pick<AuditSettings, 'maxToolCalls' | 'toolTags'>,
): RecomputedOutcome {
  const d = done.data;
  if (d.segments) {
    const score = scoreTrajectory(d.segments, d.path, gold, s);
    const formatOk = d.stopReason === 'answer' && score.formatOk;
    return {
      answer: score.answer,
      formatOk,
      reward: formatOk ? score.reward : 0,
      formatReason: d.stopReason === 'answer' ? score.formatReason : d.stopReason,
      fromText: true,
    };
  }
  const formatOk = d.formatOk && d.stopReason === 'answer' && d.answer !== null;
  return {
    answer: d.answer,
    formatOk,
    reward: formatOk ? exactMatch(d.answer as string, gold) : 0,
    fromText: false,
  };
}

/**
 * The response rebuilt from the turn and tool events: each turn's tokens (mask 1) followed by the
 * observation of the search it ended with (mask 0, cut to the response budget as the rollout
 * machine cuts it). Null when the log holds no turn events for the rollout.
 */
export function responseFromTurns(
  r: RolloutLog,
  maxResponseTokens: number,
): { tokens: number[]; mask: number[] } | null {
  if (r.turns.length === 0) return null;
  const tokens: number[] = [];
  const mask: number[] = [];
  for (const turn of r.turns) {
    for (const id of turn.data.tokenIds) {
      tokens.push(id);
      mask.push(1);
    }
    const tool = r.tools.find((x) => x.data.turn === turn.data.turn);
    if (!tool) continue;
    const room = Math.max(0, maxResponseTokens - tokens.length);
    for (const id of tool.data.observationTokenIds.slice(0, room)) {
      tokens.push(id);
      mask.push(0);
    }
  }
  return { tokens, mask };
}

/** The group of a question as the learner received it: rollouts in index order per path. */
export function groupOf(
  step: number,
  policyVersion: number,
  q: QuestionLog,
  results: ReadonlyMap<string, RolloutResult>,
): QuestionGroup {
  const ids = q.group
    ? [...q.group.data.withTool.rolloutIds, ...q.group.data.noTool.rolloutIds]
    : [...q.rollouts.keys()];
  const members = ids.map((id) => results.get(id)).filter((x): x is RolloutResult => x !== undefined);
  const byIndex = (a: RolloutResult, b: RolloutResult) => a.index - b.index;
  const withTool = members.filter((x) => x.path === 'with-tool').sort(byIndex);
  return {
    questionId: q.questionId,
    step,
    policyVersion,
    gold: q.assigned?.data.goldAnswers ?? [],
    withToolPrompt: withTool[0]?.promptTokens ?? [],
    withTool,
    noTool: members.filter((x) => x.path === 'no-tool').sort(byIndex),
  };
}

/** The policy version step `s` rolled out with: step.started's, else the step's first rollout's. */
export function stepVersion(log: RunLog, step: number): number {
  const s = log.steps.get(step);
  if (s?.started) return s.started.data.policyVersion;
  for (const q of s?.questions.values() ?? [])
    for (const r of q.rollouts.values()) if (r.completed) return r.completed.meta.policyVersion;
  return step;
}
