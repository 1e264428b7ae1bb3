/**
 * One learner step's preparation, pure (src/rl): the knowledge-boundary label and target of every
 * question, GRPO advantages over each with-tool group, the assembled batch (masks, old logprobs,
 * loss weights, mini-batches) and the step's metrics. The learner machine (learner.ts) runs it
 * once it holds a step's B groups; the audit runs the same function on the logged groups.
 */
import { getAdvantage } from '../rl/advantages.js';
import { algorithmOptions, getAlgorithm, rowKindsOf } from '../rl/algorithms/index.js';
import { assembleBatch, type BatchQuestion, type TrainBatch } from '../rl/batch.js';
import { labelBoundary } from '../rl/boundary.js';
import { rejectedFor } from '../rl/dpo.js';
import type { AkbeAggregation, LossTerm } from '../rl/losses.js';
import { boundaryShifts, type StepMetrics, stepMetrics, type ToolCallCount } from '../rl/metrics.js';
import type { OfflineTarget } from '../rl/offline.js';
import type {
  BoundaryCategory,
  BoundaryLabel,
  QuestionGroup,
  TargetContext,
  TargetSelection,
} from '../rl/types.js';
import { deriveSeed, Rng } from '../util/rng.js';

/** The learner machine's settings: the algorithm, its options and what a step trains on. */
export interface LearnerInput {
  runSeed: number;
  /** η: how many versions a trained group may lag the version it trains from (default 0). */
  maxStaleness?: number;
  /** The first step to train (default initialVersion: a synchronous run trains step k from version k). */
  initialStep?: number;
  /** B: groups per training step. */
  batchQuestions: number;
  miniBatchQuestions: number;
  /** Algorithm name (src/rl/algorithms): its rewards, whether it trains AKBE targets. */
  algo: string;
  /** The algorithm's options (defaults filled in for missing ones). */
  algoOptions?: Readonly<Record<string, number>>;
  /** Advantage estimator name (src/rl/advantages registry). */
  advantage: string;
  targetSelection: TargetSelection;
  targetContext: TargetContext;
  /** How L_AKBE averages target tokens (src/rl/losses.ts); default 'per-target'. */
  akbeAggregation?: AkbeAggregation;
  /** How TC counts tool calls in the step metrics (src/rl/metrics.ts); default 'emitted'. */
  toolCallCount?: ToolCallCount;
  /** The loss terms to train with (src/rl/losses `lossTermsFor(config)`). */
  losses: LossTerm[];
  /** offline-akbe: each question's record built once from the frozen checkpoint (src/rl/offline.ts). */
  offlineTargets?: Readonly<Record<string, OfflineTarget>>;
  /** Version the first groups are expected from (0 for a fresh run). */
  initialVersion: number;
  /** Each question's latest category before this learner started (a resumed run's log). */
  initialLastCategory?: Record<string, BoundaryCategory>;
  padId?: number;
  padTo?: number;
}

/** Everything the learner computed for one step, before training. Pure. */
export interface PreparedStep {
  step: number;
  miniBatchSeed: number;
  policyVersion: number;
  groups: QuestionGroup[];
  labels: BoundaryLabel[];
  previous: Array<BoundaryCategory | null>;
  batch: TrainBatch;
  metrics: StepMetrics;
  lastCategory: Record<string, BoundaryCategory>;
}

/** Labels, advantages, batch and step metrics of B groups (all of one step and version). */
export function prepareStep(
  input: LearnerInput,
  groupsIn: readonly QuestionGroup[],
  lastCategory: Readonly<Record<string, BoundaryCategory>>,
): PreparedStep {
  const step = groupsIn[0].step;
  const policyVersion = groupsIn[0].policyVersion;
  const groups = [...groupsIn].sort((a, b) =>
    a.questionId < b.questionId ? -1 : a.questionId > b.questionId ? 1 : 0,
  );
  const miniBatchSeed = deriveSeed(input.runSeed, 'minibatch', step);
  new Rng(miniBatchSeed).shuffle(groups);
  const advantageFn = getAdvantage(input.advantage);
  const algorithm = getAlgorithm(input.algo);
  const algoOptions = algorithmOptions(algorithm, input.algoOptions);
  const labels = groups.map((g) =>
    labelBoundary(g.withTool, g.noTool, {
      runSeed: input.runSeed,
      step,
      targetSelection: input.targetSelection,
      targetContext: input.targetContext,
    }),
  );
  const dpo = algorithm.dpoPairs === true;
  const offline = algorithm.offlineTargets === true;
  const questions: BatchQuestion[] = groups.map((group, i) => ({
    group,
    label: labels[i],
    advantages: advantageFn(algorithm.rewards(group.withTool, algoOptions)),
    ...(dpo
      ? {
          rejected: rejectedFor(group, labels[i], {
            runSeed: input.runSeed,
            step,
            toolCallCount: input.toolCallCount,
          }),
        }
      : {}),
    ...(offline ? { offline: offlineTargetOf(input.offlineTargets, group.questionId).target } : {}),
  }));
  const batch = assembleBatch(questions, {
    rowKinds: rowKindsOf(algorithm),
    miniBatchQuestions: input.miniBatchQuestions,
    akbeAggregation: input.akbeAggregation,
    padId: input.padId,
    padTo: input.padTo,
  });
  const prevMap = new Map(Object.entries(lastCategory));
  const { shifts, latest } = boundaryShifts(prevMap, labels);
  return {
    step,
    miniBatchSeed,
    policyVersion,
    groups,
    labels,
    previous: labels.map((l) => prevMap.get(l.questionId) ?? null),
    batch,
    metrics: stepMetrics(groups, labels, shifts, input.toolCallCount),
    lastCategory: Object.fromEntries(latest),
  };
}

function offlineTargetOf(targets: LearnerInput['offlineTargets'], questionId: string): OfflineTarget {
  const t = targets?.[questionId];
  if (!t) throw new Error(`learner: offline-akbe has no offline target record for question ${questionId}`);
  return t;
}

export function selectionRuleOf(label: BoundaryLabel, targetSelection: TargetSelection): string {
  if (label.target === null) return 'none';
  return label.category === 'tool-dependent' ? targetSelection : 'random-correct-no-tool';
}

/** The run's staleness bound η (0, the paper's synchronous setting, when not given). */
