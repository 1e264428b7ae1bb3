/**
 * A small, internally consistent run log for audit and replay tests: the REAL machines (run,
 * question, rollout, learner) run with scripted policy/search/trainer actors, and their facts are
 * turned into catalog events the way /work/notes/audit-needs.md asks the event sink to (a
 * reference sink, so these tests need neither the orchestrator nor NATS services).
 *
 * The scripted policy draws from the turn seed, so rewards, tool calls and categories vary across
 * questions and steps.
 */

import { createActor, fromPromise, toPromise } from 'xstate';
import { rolloutCompletedEvent, trainedBatchOf } from '../../src/actors/log/fact-events.js';
import type { AkbeEvent, EventDataMap, EventType, MetaInput } from '../../src/events/catalog.js';
import { createEvent } from '../../src/events/catalog.js';
import { ManualClock } from '../../src/events/clock.js';
import { manifestDigest, sha256Hex, trainRequestDigest } from '../../src/events/train-digest.js';

/** The manifest every published version of this fixture records (its weights' sha256 is 'ab'…). */
const CHECKPOINT_MANIFEST = { 'config.json': 'cd'.repeat(32), 'model.safetensors': 'ab'.repeat(32) };

import type { AkbeFact } from '../../src/machines/facts.js';
import { learnerMachine, type TrainRequest, type TrainResult } from '../../src/machines/learner.js';
import { type QuestionSpec, questionMachine } from '../../src/machines/question.js';
import { rolloutMachine } from '../../src/machines/rollout.js';
import { type RunInput, runMachine } from '../../src/machines/run.js';
import { lossTermsFor } from '../../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG, type TrainConfig } from '../../src/rl/config.js';
import { rowsPerUpdate } from '../../src/rl/mini-batch.js';
import { Rng } from '../../src/util/rng.js';
import { fakeSearch, type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './scripted-policy.js';

export interface AuditRunOptions {
  runId?: string;
  steps?: number;
  pool?: number;
  config?: Partial<TrainConfig>;
}

export interface AuditRun {
  events: AkbeEvent[];
  config: TrainConfig;
  questions: QuestionSpec[];
  input: RunInput;
}

const ANSWERS = ['paris', 'rome', 'madrid'];

/** The scripted policy: per turn, from its seed, search (with-tool only) or answer. */
function turnText(req: { seed: number; path: string; turn: number }): string {
  const rng = new Rng(req.seed);
  if (req.path === 'with-tool' && req.turn < 2 && rng.float() < 0.5)
    return `<search> capital ${req.turn} </search>`;
  if (rng.float() < 0.1) return 'no tags here';
  return `<think> hmm </think> <answer> ${rng.pick(ANSWERS)} </answer>`;
}

export function scriptedMachines(tok: ToyTokenizer, trainRequests: TrainRequest[]): typeof runMachine {
  const calls: ScriptedCalls = { generate: [], search: [] };
  const generate = scriptedGenerate(tok, calls, turnText);
  return runMachine.provide({
    actors: {
      question: questionMachine.provide({
        actors: {
          rollout: rolloutMachine.provide({ actors: { generate, callTool: fakeSearch(tok, calls) } }),
        },
      }),
      learner: learnerMachine.provide({
        actors: {
          train: fromPromise<TrainResult, TrainRequest>(async ({ input }) => {
            trainRequests.push(input);
            // dpo-akbe: the trainer's reference logprobs; here each row's recorded old logprobs
            // summed (v0 = the sampling policy at step 0, what the audit checks there).
            const b = input.batch;
            if (b.dpoPairs)
              b.refLogp = Float32Array.from({ length: b.rows }, (_, r) =>
                Math.min(
                  -1e-4,
                  b.oldLogprobs.subarray(r * (b.T - 1), (r + 1) * (b.T - 1)).reduce((a, x) => a + x, 0),
                ),
              );
            return {
              version: input.policyVersion + 1,
              metrics: { loss: 0.5, lossGrpo: 0.4, lossAkbe: 2, gradNorm: 1.5, clipFrac: 0.1 },
              checkpoint: `policy-v${input.policyVersion + 1}`,
            };
          }),
        },
      }),
    },
  });
}

export function auditRunInput(tok: ToyTokenizer, opts: AuditRunOptions = {}) {
  const config: TrainConfig = {
    ...DEFAULT_TRAIN_CONFIG,
    steps: opts.steps ?? 3,
    batchQuestions: 3,
    miniBatchQuestions: 2,
    gWithTool: 3,
    gNoTool: 2,
    maxToolCalls: 2,
    maxResponseTokens: 48,
    seed: 11,
    ...opts.config,
  };
  const questions: QuestionSpec[] = Array.from({ length: opts.pool ?? 4 }, (_, i) => ({
    id: `q${i}`,
    text: `question ${i}`,
    split: 'train',
    // The world's oracle, as the orchestrator passes it from the world's questions.
    known: i % 2 === 0,
    gold: [ANSWERS[i % 3] === 'madrid' ? 'Madrid' : `The ${ANSWERS[i % 3]}`],
    withToolPrompt: tok.encode(`WT question ${i} ?`),
    noToolPrompt: tok.encode(`NT question ${i} ?`),
  }));
  const input: RunInput = {
    runSeed: config.seed,
    steps: config.steps,
    questions,
    batchQuestions: config.batchQuestions,
    gWithTool: config.gWithTool,
    gNoTool: config.gNoTool,
    limits: { maxToolCalls: config.maxToolCalls, maxResponseTokens: config.maxResponseTokens },
    learner: {
      miniBatchQuestions: config.miniBatchQuestions,
      algo: config.algo,
      algoOptions: config.algoOptions,
      advantage: config.advantage,
      targetSelection: config.targetSelection,
      targetContext: config.targetContext,
      akbeAggregation: config.akbeAggregation,
      losses: lossTermsFor(config),
    },
  };
  return { config, questions, input };
}

/** Runs the machines and returns the run's events, in the order the sink would append them. */
export async function auditRunEvents(opts: AuditRunOptions = {}): Promise<AuditRun> {
  const runId = opts.runId ?? 'audit-run';
  const tok = new ToyTokenizer();
  const { config, questions, input } = auditRunInput(tok, opts);
  const trainRequests: TrainRequest[] = [];
  const facts: AkbeFact[] = [];
  const actor = createActor(scriptedMachines(tok, trainRequests), { input });
  actor.on('*', (f) => facts.push(f as AkbeFact));
  actor.start();
  await toPromise(actor);
  return { events: factsToEvents(runId, config, questions, facts, trainRequests), config, questions, input };
}

/** The reference sink: facts -> catalog events (see /work/notes/audit-needs.md). */
export function factsToEvents(
  runId: string,
  config: TrainConfig,
  questions: QuestionSpec[],
  facts: readonly AkbeFact[],
  trainRequests: readonly TrainRequest[],
): AkbeEvent[] {
  const clock = new ManualClock();
  const events: AkbeEvent[] = [];
  const add = <K extends EventType>(type: K, data: EventDataMap[K], meta: Omit<MetaInput<K>, 'runId'>) =>
    events.push(createEvent(type, data, { ...meta, runId } as MetaInput<K>, clock) as AkbeEvent);
  let current = { step: 0, version: 0 };
  // Each step's request digest as the orchestrator forms it (run-steps.ts): before the trainer
  // fills DPO's refLogp, with the run's lr, epochs and rows per update.
  const stepDigest = (step: number) => {
    const req = trainRequests.find((r) => r.step === step);
    if (!req) return sha256Hex(`no train request of step ${step}`);
    return trainRequestDigest(runId, {
      step,
      policyVersion: req.policyVersion,
      batch: { ...req.batch, refLogp: undefined },
      losses: req.losses,
      lr: config.lr,
      epochs: config.ppoEpochs,
      rowsPerUpdate: rowsPerUpdate(config.miniBatchQuestions, config.gWithTool),
      padId: 0,
    });
  };
  // The oracle rates, counted here by hand (the audit recomputes them with src/rl/metrics.ts).
  const knownOf = new Map(questions.map((q) => [q.id, q.known]));
  const oracle = new Map<number, { known: number[]; unknown: number[] }>();
  add(
    'run.started',
    {
      algo: config.algo,
      // As runSetup records it (padId: the tokenizer's, 0 for the toy one, as the batch pads).
      config: { ...config, toolCallCount: 'emitted', padId: 0 },
      seeds: { run: config.seed },
      worldRef: 'world:test',
      policyRef: 'policy:test',
      akbeVersion: '0.1.0',
      questionPoolSize: questions.length,
    },
    { step: 0, policyVersion: 0, seed: config.seed },
  );
  for (const f of facts) {
    switch (f.type) {
      case 'step.started':
        current = { step: f.step, version: f.policyVersion };
        add(
          'step.started',
          { step: f.step, policyVersion: f.policyVersion, questionIds: f.questionIds },
          {
            step: f.step,
            policyVersion: f.policyVersion,
            seed: f.seed,
          },
        );
        break;
      case 'question.assigned':
        add(
          'question.assigned',
          { text: f.text, goldAnswers: f.gold, split: f.split, groupSize: f.groupSize, known: f.known },
          { step: f.step, policyVersion: f.policyVersion, questionId: f.questionId },
        );
        break;
      case 'rollout.started':
        add(
          'rollout.started',
          { path: f.path, index: f.index, seed: f.seed },
          {
            step: current.step,
            policyVersion: f.policyVersion,
            questionId: f.questionId,
            rolloutId: f.rolloutId,
            seed: f.seed,
          },
        );
        break;
      case 'rollout.turn':
        add(
          'rollout.turn',
          { turn: f.turn, tokenIds: Int32Array.from(f.tokenIds), action: f.action },
          {
            step: current.step,
            policyVersion: f.policyVersion,
            questionId: f.questionId,
            rolloutId: f.rolloutId,
            seed: f.seed,
          },
        );
        break;
      case 'tool.called':
        add(
          'tool.called',
          {
            tool: f.tool,
            turn: f.turn,
            query: f.query,
            record: f.record,
            observationTokenIds: Int32Array.from(f.observationTokenIds),
            latencyMs: f.latencyMs,
            error: f.error,
          },
          {
            step: current.step,
            policyVersion: f.policyVersion,
            questionId: f.questionId,
            rolloutId: f.rolloutId,
          },
        );
        break;
      case 'rollout.completed': {
        // The same mapping as the integration's event sink, so the audit tests read real events.
        events.push(rolloutCompletedEvent(runId, current.step, f.result, clock) as AkbeEvent);
        break;
      }
      case 'group.completed': {
        const g = f.group;
        const counts = oracle.get(g.step) ?? { known: [0, 0], unknown: [0, 0] };
        const cell = knownOf.get(g.questionId) ? counts.known : counts.unknown;
        for (const r of g.withTool) cell[r.toolCalls > 0 ? 1 : 0]++; // [no search, searched]
        oracle.set(g.step, counts);
        const path = (rs: typeof g.withTool) => ({
          rolloutIds: rs.map((r) => r.rolloutId),
          rewards: rs.map((r) => r.reward),
        });
        add(
          'group.completed',
          { withTool: path(g.withTool), noTool: path(g.noTool) },
          {
            step: g.step,
            policyVersion: g.policyVersion,
            questionId: g.questionId,
          },
        );
        break;
      }
      case 'boundary.labeled':
        add(
          'boundary.labeled',
          {
            wt: f.label.wt,
            nt: f.label.nt,
            category: f.label.category,
            targetRolloutId: f.label.target?.rolloutId ?? null,
            selectionRule: f.selectionRule,
            tieBreakSeed: f.label.tieBreakSeed,
            previousCategory: f.previousCategory,
          },
          {
            step: f.step,
            policyVersion: f.policyVersion,
            questionId: f.label.questionId,
            seed: f.label.tieBreakSeed,
          },
        );
        break;
      case 'learner.step': {
        const sm = f.stepMetrics;
        const b = trainRequests.find((r) => r.step === f.step)!.batch;
        const correct = sm.trainReward * sm.questions * config.gWithTool;
        add(
          'learner.step',
          {
            policyVersionBefore: f.policyVersion,
            policyVersionAfter: f.policyVersion + 1,
            metrics: {
              loss: f.trainMetrics.loss,
              lossGrpo: f.trainMetrics.lossGrpo,
              lossAkbe: f.trainMetrics.lossAkbe,
              gradNorm: f.trainMetrics.gradNorm,
              clipFrac: f.trainMetrics.clipFrac,
              kl: 0,
              entropy: 0,
              em: sm.withToolEm,
              tc: sm.meanToolCalls,
              tp: sm.toolCallsPerBatch > 0 ? correct / sm.toolCallsPerBatch : null,
              categoryCounts: sm.categories,
              boundaryShifts: sm.boundaryShifts,
              meanResponseLength: sm.meanResponseLength,
              toolCallsPerBatch: sm.toolCallsPerBatch,
              tokensPerSecond: 100,
              rolloutSeconds: 1,
              trainSeconds: 1,
              updates: f.batch.miniBatches,
            },
            extra: oracleExtra(oracle.get(f.step)),
            batch: trainedBatchOf(b, f.miniBatchSeed),
            requestSha256: stepDigest(f.step),
          },
          { step: f.step, policyVersion: f.policyVersion },
        );
        break;
      }
      case 'policy.published':
        add(
          'policy.published',
          {
            version: f.version,
            bucket: 'akbe-checkpoints',
            checkpoint: f.checkpoint ?? `v${f.version}`,
            sha256: 'ab'.repeat(32),
            bytes: 1000,
            // The trainer's digest of what it trained on: equal to the learner's, as in a clean run.
            requestSha256: stepDigest(f.step),
            // Every file of the checkpoint, as publish() records it (src/actors/checkpoints).
            manifest: CHECKPOINT_MANIFEST,
            manifestSha256: manifestDigest(CHECKPOINT_MANIFEST),
          },
          { step: f.step, policyVersion: f.version },
        );
        break;
      case 'run.finished':
        add(
          'run.finished',
          { status: 'completed', stepsCompleted: f.steps, elapsedSeconds: 1 },
          {
            step: f.steps,
            policyVersion: f.policyVersion,
          },
        );
        break;
      case 'group.discarded':
        break;
    }
  }
  return events;
}

/** learner.step.extra's oracle rates from [no search, searched] counts (keys absent when 0/0). */
function oracleExtra(c: { known: number[]; unknown: number[] } | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  if (!c) return out;
  const [kNo, kYes] = c.known;
  const [uNo, uYes] = c.unknown;
  if (kNo + kYes > 0) out.knownSearchRate = kYes / (kNo + kYes);
  if (uNo + uYes > 0) out.unknownNoSearchRate = uNo / (uNo + uYes);
  return out;
}

/** Assigns stream sequences 1..n, as a replay from the store would. */
export function withSeqs(events: readonly AkbeEvent[]): AkbeEvent[] {
  return events.map((e, i) => ({ ...e, meta: { ...e.meta, seq: i + 1 } }) as AkbeEvent);
}
