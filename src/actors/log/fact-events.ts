/**
 * Machine facts -> catalog events: the one pure mapping from what the machines report
 * (src/machines/facts.ts) to the catalog (src/events/catalog.ts): envelope, dedupe id (the event's
 * identity, so that a retried or redelivered append is stored once) and the seed of the draw the
 * event records. No I/O: the sink (event-sink.ts) stores what this returns. Facts without a
 * catalog type (`group.discarded`, and run.finished, which the orchestrator writes) map to null.
 */
import {
  type AkbeEvent,
  createEvent,
  type LearnerMetrics,
  type PolicyPublishedData,
  type TrainedBatch,
} from '../../events/catalog.js';
import type { EventClock } from '../../events/clock.js';
import type { AkbeFact } from '../../machines/facts.js';
import type { TrainBatch } from '../../rl/batch.js';
import type { OfflineTarget } from '../../rl/offline.js';
import type { RolloutResult } from '../../rl/types.js';

export interface FactContext {
  runId: string;
  /** Timing of a learner step, keyed by step. */
  timing?: (step: number) => StepTiming | undefined;
  /** Where the checkpoint of a published version lives. */
  published?: (version: number) => Omit<PolicyPublishedData, 'version'> | undefined;
  /** The batch the trainer was given at a step (the learner's fact only summarises it). */
  trainBatch?: (step: number) => TrainBatch | undefined;
  /** The canonical digest of the train request the learner sent for a step (train-digest.ts). */
  requestSha256?: (step: number) => string | undefined;
  /** Further learner.step.extra keys the learner cannot know (the world's oracle rates). */
  extra?: (step: number) => Record<string, number>;
  /** offline-akbe: a question's offline record, put on each of its question.assigned. */
  offline?: (questionId: string) => OfflineTarget | undefined;
  clock?: EventClock;
}

export class FactMappingError extends Error {
  constructor(
    readonly factType: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`fact ${factType}: ${message}`, opts);
    this.name = 'FactMappingError';
  }
}

/** The meta of a rollout fact that carries its seed (rollout.started, rollout.turn). */
function rolloutFactMeta(
  ctx: FactContext,
  fact: Extract<AkbeFact, { type: 'rollout.started' | 'rollout.turn' }>,
) {
  return {
    runId: ctx.runId,
    step: fact.step,
    policyVersion: fact.policyVersion,
    questionId: fact.questionId,
    rolloutId: fact.rolloutId,
    seed: fact.seed,
  };
}

/** The catalog event of a rollout's result (shared with the rollout worker's completion). */
export function rolloutCompletedEvent(runId: string, step: number, r: RolloutResult, clock?: EventClock) {
  return createEvent(
    'rollout.completed',
    {
      path: r.path,
      index: r.index,
      promptTokenIds: Int32Array.from(r.promptTokens),
      responseTokenIds: Int32Array.from(r.responseTokens),
      oldLogprobs: Float32Array.from(r.responseLogprobs),
      lossMask: Uint8Array.from(r.responseMask),
      toolCallSpans: r.toolCallSpans.map(([start, end]): [number, number] => [start, end]),
      answer: r.answer,
      formatOk: r.formatOk,
      reward: r.reward,
      toolCalls: r.toolCalls,
      seed: r.seed,
      stopReason: r.stopReason,
      // A result rebuilt from a log without texts has none: record none rather than [].
      ...(r.segments.length > 0 ? { segments: r.segments.map((x) => ({ kind: x.kind, text: x.text })) } : {}),
    },
    {
      runId,
      step,
      policyVersion: r.policyVersion,
      questionId: r.questionId,
      rolloutId: r.rolloutId,
      seed: r.seed,
    },
    clock,
  );
}

/**
 * The trained batch row by row, as `learner.step.batch` records it: the only place the log holds
 * the advantages and the AKBE target rows, which the audit recomputes with assembleBatch.
 */
export function trainedBatchOf(b: TrainBatch, miniBatchSeed: number): TrainedBatch {
  const miniBatchOf = new Map<number, number>();
  b.miniBatches.forEach((mb, k) => {
    for (const i of mb) if (!miniBatchOf.has(i)) miniBatchOf.set(i, k);
  });
  return {
    T: b.T,
    lossTokens: b.lossTokens,
    miniBatchSeed,
    rows: b.rowInfo.map((row, i) => ({
      rolloutId: row.rolloutId,
      context: row.context,
      advantage: b.advantages[i],
      grpo: b.pgWeight[i] === 1,
      akbe: b.akbeWeight[i] > 0,
      akbeWeight: b.akbeWeight[i],
      miniBatch: miniBatchOf.get(i) ?? -1,
    })),
    ...(b.dpoPairs
      ? {
          dpoPairs: b.dpoPairs.map((p) => ({
            ...p,
            ...(b.refLogp ? { refChosen: b.refLogp[p.chosen], refRejected: b.refLogp[p.rejected] } : {}),
          })),
        }
      : {}),
  };
}

/** Maps one fact to its catalog event (validated); null for facts the catalog does not record. */
export function factToEvent(fact: AkbeFact, ctx: FactContext): AkbeEvent | null {
  switch (fact.type) {
    case 'rollout.started':
    case 'rollout.turn':
    case 'tool.called':
    case 'rollout.completed':
      return rolloutEvent(fact, ctx);
    case 'question.assigned':
    case 'group.completed':
    case 'boundary.labeled':
      return questionEvent(fact, ctx);
    case 'learner.step':
      return learnerStepEvent(fact, ctx);
    case 'policy.published':
    case 'step.started':
      return runEvent(fact, ctx);
    case 'run.finished':
      // The orchestrator writes run.finished itself (it knows the status and the elapsed time).
      return null;
    case 'group.discarded':
      return null;
  }
}

/** Facts of one rollout (the rollout machine). */
function rolloutEvent(
  fact: Extract<AkbeFact, { type: 'rollout.started' | 'rollout.turn' | 'tool.called' | 'rollout.completed' }>,
  ctx: FactContext,
): AkbeEvent {
  const { runId, clock } = ctx;
  switch (fact.type) {
    case 'rollout.started':
      return createEvent(
        'rollout.started',
        { path: fact.path, index: fact.index, seed: fact.seed },
        rolloutFactMeta(ctx, fact),
        clock,
      );
    case 'rollout.turn':
      return createEvent(
        'rollout.turn',
        { turn: fact.turn, tokenIds: Int32Array.from(fact.tokenIds), action: fact.action },
        rolloutFactMeta(ctx, fact),
        clock,
      );
    case 'tool.called':
      return createEvent(
        'tool.called',
        {
          tool: fact.tool,
          turn: fact.turn,
          query: fact.query,
          record: fact.record,
          observationTokenIds: Int32Array.from(fact.observationTokenIds),
          latencyMs: Math.max(0, fact.latencyMs),
          error: fact.error,
        },
        {
          runId,
          step: fact.step,
          policyVersion: fact.policyVersion,
          questionId: fact.questionId,
          rolloutId: fact.rolloutId,
        },
        clock,
      );
    case 'rollout.completed': {
      const r = fact.result;
      return rolloutCompletedEvent(runId, fact.step, r, clock);
    }
  }
}

/** Facts of one question (the question machine, and the learner's label). */
function questionEvent(
  fact: Extract<AkbeFact, { type: 'question.assigned' | 'group.completed' | 'boundary.labeled' }>,
  ctx: FactContext,
): AkbeEvent {
  const { runId, clock } = ctx;
  switch (fact.type) {
    case 'question.assigned': {
      const offline = ctx.offline?.(fact.questionId);
      return createEvent(
        'question.assigned',
        {
          text: fact.text,
          goldAnswers: fact.gold,
          split: fact.split,
          groupSize: fact.groupSize,
          ...(fact.known === undefined ? {} : { known: fact.known }),
          ...(offline ? { offline } : {}),
        },
        { runId, step: fact.step, policyVersion: fact.policyVersion, questionId: fact.questionId },
        clock,
      );
    }
    case 'group.completed': {
      const g = fact.group;
      return createEvent(
        'group.completed',
        {
          withTool: {
            rolloutIds: g.withTool.map((r) => r.rolloutId),
            rewards: g.withTool.map((r) => r.reward),
          },
          noTool: { rolloutIds: g.noTool.map((r) => r.rolloutId), rewards: g.noTool.map((r) => r.reward) },
        },
        { runId, step: g.step, policyVersion: g.policyVersion, questionId: g.questionId },
        clock,
      );
    }
    case 'boundary.labeled': {
      const l = fact.label;
      return createEvent(
        'boundary.labeled',
        {
          wt: l.wt,
          nt: l.nt,
          category: l.category,
          targetRolloutId: l.target?.rolloutId ?? null,
          selectionRule: fact.selectionRule,
          tieBreakSeed: l.tieBreakSeed,
          previousCategory: fact.previousCategory,
        },
        {
          runId,
          step: fact.step,
          policyVersion: fact.policyVersion,
          questionId: l.questionId,
          seed: l.tieBreakSeed,
        },
        clock,
      );
    }
  }
}

/** What the orchestrator's StepTimer knows about a step that the learner's facts do not carry. */
export interface StepTiming {
  rolloutSeconds: number;
  trainSeconds: number;
  tokensPerSecond: number;
}

/** learner.step: the learner's step metrics, the trainer's, the step's timing and the trained batch. */
function learnerStepEvent(fact: Extract<AkbeFact, { type: 'learner.step' }>, ctx: FactContext): AkbeEvent {
  const { runId, clock } = ctx;
  const s = fact.stepMetrics;
  const t = fact.trainMetrics;
  const timing = ctx.timing?.(fact.step);
  const toolCalls = s.toolCallsPerBatch;
  const metrics: LearnerMetrics = {
    loss: t.loss ?? 0,
    lossGrpo: t.pgLoss ?? 0,
    lossAkbe: t.akbeLoss ?? 0,
    gradNorm: Math.max(0, t.gradNorm ?? 0),
    clipFrac: Math.min(1, Math.max(0, t.clipFrac ?? 0)),
    kl: t.approxKl ?? 0,
    entropy: t.entropy ?? 0,
    em: s.withToolEm,
    tc: s.meanToolCalls,
    // TP = sum correct / sum tool calls over the with-tool rollouts = EM / mean tool calls.
    tp: s.meanToolCalls > 0 ? s.withToolEm / s.meanToolCalls : null,
    categoryCounts: { ...s.categories },
    boundaryShifts: s.boundaryShifts,
    meanResponseLength: s.meanResponseLength,
    toolCallsPerBatch: toolCalls,
    tokensPerSecond: timing?.tokensPerSecond ?? t.tokensPerSecond ?? 0,
    rolloutSeconds: timing?.rolloutSeconds ?? 0,
    trainSeconds: timing?.trainSeconds ?? t.trainSeconds ?? 0,
    updates: t.updates ?? fact.batch.miniBatches,
  };
  const extra: Record<string, number> = {
    noToolEm: s.noToolEm,
    trainReward: s.trainReward,
    formatFailures: s.formatFailures,
    meanGeneratedLength: s.meanGeneratedLength,
    batchRows: fact.batch.rows,
    batchT: fact.batch.T,
    lossTokens: fact.batch.lossTokens,
    miniBatches: fact.batch.miniBatches,
  };
  for (const [k, v] of Object.entries(t)) if (Number.isFinite(v)) extra[`train/${k}`] = v;
  Object.assign(extra, ctx.extra?.(fact.step));
  const trained = ctx.trainBatch?.(fact.step);
  return createEvent(
    'learner.step',
    {
      policyVersionBefore: fact.trainVersion ?? fact.policyVersion,
      policyVersionAfter: (fact.trainVersion ?? fact.policyVersion) + 1,
      metrics,
      extra,
      ...(trained ? { batch: trainedBatchOf(trained, fact.miniBatchSeed) } : {}),
      requestSha256: ctx.requestSha256?.(fact.step) ?? null,
      ...(fact.trainVersion === undefined
        ? {}
        : { rolloutVersion: fact.policyVersion, dropped: fact.dropped ?? [] }),
    },
    { runId, step: fact.step, policyVersion: fact.policyVersion, seed: fact.miniBatchSeed },
    clock,
  );
}

/** Facts of the run and its policy versions. */
function runEvent(
  fact: Extract<AkbeFact, { type: 'policy.published' | 'step.started' }>,
  ctx: FactContext,
): AkbeEvent {
  const { runId, clock } = ctx;
  switch (fact.type) {
    case 'policy.published': {
      const where = ctx.published?.(fact.version);
      if (!where) throw new FactMappingError(fact.type, `no checkpoint recorded for version ${fact.version}`);
      return createEvent(
        'policy.published',
        { version: fact.version, ...where },
        { runId, step: fact.step, policyVersion: fact.version },
        clock,
      );
    }
    case 'step.started':
      return createEvent(
        'step.started',
        { step: fact.step, policyVersion: fact.policyVersion, questionIds: fact.questionIds },
        { runId, step: fact.step, policyVersion: fact.policyVersion, seed: fact.seed },
        clock,
      );
  }
}
