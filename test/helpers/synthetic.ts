/**
 * A synthetic run's events: every event type, with realistic shapes and sizes (token arrays,
 * logprobs, masks), from a seeded RNG. Used by `akbe demo`, bench/events.ts and the tests; it is
 * not a simulation of training (no policy, no search), only of what the event log holds.
 */

import {
  type AkbeEvent,
  type BoundaryCategory,
  categoryOf,
  createEvent,
  type RolloutPath,
} from '../../src/events/catalog.js';
import type { EventClock } from '../../src/events/clock.js';
import { ManualClock } from '../../src/events/clock.js';
import { deriveSeed, Rng } from '../../src/util/rng.js';

export interface SyntheticRunOptions {
  runId: string;
  steps?: number;
  questionsPerStep?: number;
  withTool?: number;
  noTool?: number;
  /** Mean response length in tokens (prompt is a quarter of it). */
  responseTokens?: number;
  seed?: number;
  /** Also emit rollout.turn and tool.called events (more, smaller events). */
  turns?: boolean;
  clock?: EventClock;
}

function tokens(rng: Rng, n: number): Int32Array {
  const a = new Int32Array(n);
  for (let i = 0; i < n; i++) a[i] = rng.int(4096);
  return a;
}

/** One rollout.completed event of `responseTokens` tokens, e.g. for codec benchmarks. */
export function syntheticRollout(
  runId: string,
  rng: Rng,
  opts: {
    step: number;
    questionId: string;
    path: RolloutPath;
    index: number;
    responseTokens: number;
    at?: number;
  },
) {
  const t = opts.responseTokens;
  const oldLogprobs = new Float32Array(t);
  const lossMask = new Uint8Array(t);
  let toolCalls = 0;
  const toolCallSpans: Array<[number, number]> = [];
  for (let i = 0; i < t; i++) {
    oldLogprobs[i] = -rng.float() * 4;
    // Blocks of 32 tokens on the with-tool path: 24 generated, then an 8-token observation.
    const observation = opts.path === 'with-tool' && i % 32 >= 24;
    lossMask[i] = observation ? 0 : 1;
    if (observation) oldLogprobs[i] = 0;
    if (opts.path === 'with-tool' && i % 32 === 24) {
      toolCalls++;
      toolCallSpans.push([i - 4, i - 1]); // the query: 3 tokens before the closing tag
    }
  }
  const correct = rng.float() < 0.5;
  const rolloutId = `s${opts.step}-${opts.questionId}-${opts.path === 'with-tool' ? 'wt' : 'nt'}-${opts.index}`;
  return createEvent(
    'rollout.completed',
    {
      path: opts.path,
      index: opts.index,
      promptTokenIds: tokens(rng, Math.max(1, t >> 2)),
      responseTokenIds: tokens(rng, t),
      oldLogprobs,
      lossMask,
      toolCallSpans,
      answer: correct ? 'Paris' : rng.float() < 0.5 ? null : 'Lyon',
      formatOk: true,
      reward: correct ? 1 : 0,
      toolCalls,
      seed: deriveSeed(7, runId, opts.step, opts.questionId, opts.path, opts.index),
      stopReason: 'answer',
    },
    {
      runId,
      step: opts.step,
      policyVersion: opts.step,
      questionId: opts.questionId,
      rolloutId,
      ...(opts.at ? { at: opts.at } : {}),
    },
  );
}

/** Every event of a small synthetic run, in the order a real run would append them. */
export function syntheticRunEvents(opts: SyntheticRunOptions): AkbeEvent[] {
  const {
    runId,
    steps = 2,
    questionsPerStep = 2,
    withTool = 2,
    noTool = 2,
    responseTokens = 64,
    seed = 1,
    turns = true,
  } = opts;
  const clock = opts.clock ?? new ManualClock();
  const rng = new Rng(deriveSeed(seed, runId));
  const at = () => clock.now();
  const events: AkbeEvent[] = [];
  const previous = new Map<string, BoundaryCategory>();
  events.push(
    createEvent(
      'run.started',
      {
        algo: 'grpo+akbe',
        config: {
          batchQuestions: questionsPerStep,
          groupWithTool: withTool,
          groupNoTool: noTool,
          lambda: 0.05,
          akbeLoss: 'nll',
          akbeContext: 'with-tool',
        },
        seeds: { run: seed },
        worldRef: `world:synthetic:seed=${seed}`,
        policyRef: 'policy:init',
        akbeVersion: '0.1.0',
      },
      { runId, step: 0, policyVersion: 0, seed, at: at() },
    ),
  );
  for (let step = 0; step < steps; step++) {
    const questionIds = Array.from({ length: questionsPerStep }, (_, i) => `q${step * questionsPerStep + i}`);
    const base = { runId, step, policyVersion: step };
    events.push(
      createEvent('step.started', { step, policyVersion: step, questionIds }, { ...base, at: at() }),
    );
    const counts = { 'tool-dependent': 0, efficiency: 0, hallucination: 0, 'both-wrong': 0 };
    let shifts = 0;
    for (const questionId of questionIds) {
      const q = { ...base, questionId };
      events.push(
        createEvent(
          'question.assigned',
          {
            text: `Which city is the capital of entity ${questionId}?`,
            goldAnswers: ['Paris'],
            split: 'train',
            groupSize: { withTool, noTool },
          },
          { ...q, at: at() },
        ),
      );
      const groups = {
        'with-tool': { rolloutIds: [] as string[], rewards: [] as number[] },
        'no-tool': { rolloutIds: [] as string[], rewards: [] as number[] },
      };
      for (const path of ['with-tool', 'no-tool'] as const) {
        for (let index = 0; index < (path === 'with-tool' ? withTool : noTool); index++) {
          const done = syntheticRollout(runId, rng, { step, questionId, path, index, responseTokens, at: 0 });
          const r = { ...q, rolloutId: done.meta.rolloutId };
          events.push(
            createEvent(
              'rollout.started',
              { path, index, seed: done.data.seed },
              { ...r, seed: done.data.seed, at: at() },
            ),
          );
          if (turns) {
            events.push(
              createEvent(
                'rollout.turn',
                {
                  turn: 0,
                  tokenIds: done.data.responseTokenIds.slice(0, 16),
                  action: path === 'with-tool' ? 'search' : 'answer',
                },
                { ...r, at: at() },
              ),
            );
            if (path === 'with-tool') {
              events.push(
                createEvent(
                  'tool.called',
                  {
                    tool: 'search',
                    turn: 0,
                    query: `capital of ${questionId}`,
                    record: { passageIds: ['p1', 'p7', 'p9'], scores: [0.91, 0.55, 0.31] },
                    observationTokenIds: tokens(rng, 48),
                    latencyMs: 2.5,
                    error: null,
                  },
                  { ...r, at: at() },
                ),
              );
            }
          }
          done.meta.at = at();
          events.push(done);
          groups[path].rolloutIds.push(done.meta.rolloutId);
          groups[path].rewards.push(done.data.reward);
        }
      }
      events.push(
        createEvent(
          'group.completed',
          { withTool: groups['with-tool'], noTool: groups['no-tool'] },
          { ...q, at: at() },
        ),
      );
      const wt = groups['with-tool'].rewards.some((x) => x > 0);
      const nt = groups['no-tool'].rewards.some((x) => x > 0);
      const category = categoryOf(wt, nt);
      counts[category]++;
      const prev = previous.get(questionId) ?? null;
      if (prev !== null && prev !== category) shifts++;
      previous.set(questionId, category);
      const targetPath = category === 'tool-dependent' ? 'with-tool' : 'no-tool';
      const target =
        category === 'both-wrong'
          ? null
          : groups[targetPath].rolloutIds[groups[targetPath].rewards.findIndex((x) => x > 0)];
      const tieBreakSeed = deriveSeed(seed, 'tie-break', step, questionId);
      events.push(
        createEvent(
          'boundary.labeled',
          {
            wt,
            nt,
            category,
            targetRolloutId: target,
            selectionRule:
              category === 'tool-dependent'
                ? 'min-tool-calls'
                : category === 'both-wrong'
                  ? 'none'
                  : 'random-correct-no-tool',
            tieBreakSeed,
            previousCategory: prev,
          },
          { ...q, seed: tieBreakSeed, at: at() },
        ),
      );
    }
    events.push(
      createEvent(
        'learner.step',
        {
          policyVersionBefore: step,
          policyVersionAfter: step + 1,
          metrics: {
            loss: 0.5 - 0.01 * step,
            lossGrpo: 0.45,
            lossAkbe: 1.0,
            gradNorm: 1.2,
            clipFrac: 0.05,
            kl: 0,
            entropy: 2.1,
            em: 0.5,
            tc: 1.5,
            tp: 0.33,
            categoryCounts: counts,
            boundaryShifts: shifts,
            meanResponseLength: responseTokens,
            toolCallsPerBatch: 3 * questionsPerStep,
            tokensPerSecond: 5000,
            rolloutSeconds: 1.5,
            trainSeconds: 0.75,
            updates: Math.max(1, questionsPerStep >> 3),
          },
          extra: {},
        },
        { ...base, at: at() },
      ),
    );
    events.push(
      createEvent(
        'policy.published',
        {
          version: step + 1,
          bucket: 'akbe-checkpoints',
          checkpoint: `${runId}/policy-v${step + 1}.safetensors`,
          sha256: 'ab'.repeat(32),
          bytes: 17_000_000,
        },
        { ...base, policyVersion: step + 1, at: at() },
      ),
    );
  }
  events.push(
    createEvent(
      'eval.completed',
      {
        when: 'after',
        version: steps,
        split: 'dev',
        questions: 32,
        em: 0.5,
        tc: 1.25,
        tp: 0.4,
        noToolEm: 0.25,
        knownSearchRate: 0.5,
        unknownNoSearchRate: null,
      },
      { runId, step: Math.max(0, steps - 1), policyVersion: steps, at: at() },
    ),
  );
  events.push(
    createEvent(
      'run.finished',
      { status: 'completed', stepsCompleted: steps, elapsedSeconds: 4.2 },
      { runId, step: steps, policyVersion: steps, at: at() },
    ),
  );
  return events;
}
