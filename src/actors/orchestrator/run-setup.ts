/**
 * Run setup, pure: from the run's spec and what was loaded for it (the world's questions, the
 * policy's context, the tools, the search index) to the response limit, run.started's data and
 * the run machine's input. No I/O and no clock: the orchestrator loads, this decides.
 */

import type { RunStartedData } from '../../events/catalog.js';
import type { Json } from '../../events/schema.js';
import type { QuestionSpec } from '../../machines/question.js';
import type { RunInput } from '../../machines/run.js';
import { lossTermsFor } from '../../rl/algorithms/index.js';
import { effectiveLambda } from '../../rl/losses.js';
import { DEFAULT_TOOL_CALL_COUNT } from '../../rl/metrics.js';
import type { BoundaryCategory } from '../../rl/types.js';
import type { AnyTool } from '../../tools/tool.js';
import type { RunSpec } from '../roles/roles.js';

/** What the orchestrator loaded for a run. */
export interface LoadedRun {
  spec: RunSpec;
  questions: QuestionSpec[];
  /** The policy's context length (prompt + response must fit it; it is also the training T). */
  context: number;
  padId: number;
  tools: readonly AnyTool[];
  index: { dir: string; fingerprint: string };
  /** Where a resumed run continues (null: a fresh run) and its questions' last categories. */
  resume: { step: number; version: number; lastCategory: Record<string, BoundaryCategory> } | null;
  akbeVersion: string;
}

export interface RunSetup {
  /** The response limit actually used: the configured one, cut to what the context leaves. */
  maxResponseTokens: number;
  /** Set when the limit was cut (the line says why). */
  note: string | null;
  /** The spec the roles start with (index and its fingerprint filled in). */
  spec: RunSpec;
  runStarted: RunStartedData;
  machineInput: RunInput;
}

export function runSetup(r: LoadedRun): RunSetup {
  const cfg = r.spec.train;
  const longestPrompt = Math.max(
    ...r.questions.flatMap((q) => [q.withToolPrompt.length, q.noToolPrompt.length]),
  );
  // Prompt + response must fit the policy's context (and the training graph's T = context).
  const maxResponseTokens = Math.min(cfg.maxResponseTokens, r.context - longestPrompt);
  const note =
    maxResponseTokens < cfg.maxResponseTokens
      ? `maxResponseTokens ${cfg.maxResponseTokens} -> ${maxResponseTokens}: the policy's context is ${r.context} tokens`
      : null;
  const toolTags = r.tools.map((t) => t.tag);
  const spec: RunSpec = {
    ...r.spec,
    index: r.index.dir,
    indexFingerprint: r.spec.indexFingerprint ?? r.index.fingerprint,
  };
  const config = startedConfig(r, spec, maxResponseTokens, toolTags);
  return {
    maxResponseTokens,
    note,
    spec,
    runStarted: {
      algo: cfg.algo,
      config,
      seeds: { run: cfg.seed },
      worldRef: spec.worldDir,
      policyRef: spec.basePolicy,
      akbeVersion: r.akbeVersion,
    },
    machineInput: machineInputOf(r, maxResponseTokens, toolTags),
  };
}

/** run.started's config: flat, JSON only. */
function startedConfig(
  r: LoadedRun,
  spec: RunSpec,
  maxResponseTokens: number,
  toolTags: string[],
): { [key: string]: Json } {
  const cfg = r.spec.train;
  // Flat: every TrainConfig key at the top level (what an auditor reads), the effective response
  // limit, the batch padding, the tools, where the world, the index and the base policy are, and
  // the dev evaluation's settings (a resumed run evaluates as it was started).
  return JSON.parse(
    JSON.stringify({
      ...cfg,
      configuredMaxResponseTokens: cfg.maxResponseTokens,
      effectiveLambda: effectiveLambda(cfg),
      toolCallCount: DEFAULT_TOOL_CALL_COUNT,
      maxResponseTokens,
      padId: r.padId,
      padTo: r.context,
      questionPoolSize: r.questions.length,
      worldDir: spec.worldDir,
      basePolicy: spec.basePolicy,
      topK: spec.topK,
      tools: r.tools.map((t) => t.name),
      toolTags,
      searchIndex: spec.index,
      indexFingerprint: spec.indexFingerprint,
      evalQuestions: spec.eval?.questions,
      evalSplits: spec.eval?.splits,
      keepCheckpoints: spec.keepCheckpoints,
      plugins: spec.plugins?.length ? spec.plugins : undefined,
    }),
  ) as { [key: string]: Json };
}

/** The run machine's input: the questions, the step's shape and limits, the learner's settings. */
function machineInputOf(r: LoadedRun, maxResponseTokens: number, toolTags: string[]): RunInput {
  const cfg = r.spec.train;
  return {
    runSeed: cfg.seed,
    steps: cfg.steps,
    questions: r.questions,
    batchQuestions: cfg.batchQuestions,
    gWithTool: cfg.gWithTool,
    gNoTool: cfg.gNoTool,
    limits: { toolTags, maxToolCalls: cfg.maxToolCalls, maxResponseTokens },
    sampling: { temperature: cfg.temperature, topP: cfg.topP },
    initialVersion: r.resume?.version ?? 0,
    initialStep: r.resume ? r.resume.step + 1 : 0,
    ...(cfg.maxStaleness > 0 ? { maxStaleness: cfg.maxStaleness } : {}),
    learner: {
      miniBatchQuestions: cfg.miniBatchQuestions,
      algo: cfg.algo,
      algoOptions: cfg.algoOptions,
      advantage: cfg.advantage,
      targetSelection: cfg.targetSelection,
      targetContext: cfg.targetContext,
      akbeAggregation: cfg.akbeAggregation,
      losses: lossTermsFor(cfg),
      padId: r.padId,
      padTo: r.context,
      initialLastCategory: r.resume?.lastCategory ?? {},
    },
  };
}
