/**
 * The question machine: one question in one step. It spawns G_wt with-tool and G_nt no-tool
 * rollouts at once (both paths in parallel), collects their scored trajectories, reports
 * `group.completed` and outputs the QuestionGroup the learner needs.
 *
 * The `rollout` actor is injected: by default the rollout machine itself (its own `generate` and
 * `search` actors provided by the caller); the NATS wiring may provide an actor that sends the
 * rollout to a worker (`cmd.rollout`) and resolves with its RolloutResult.
 *
 * Seeds: rollout i of path p samples with deriveSeed(runSeed, 'rollout', step, questionId, p, i).
 * A rollout that fails (a service error, not a format failure) fails the question with
 * QuestionRolloutError: retrying is the caller's decision.
 */
import { enqueueActions, setup } from 'xstate';
import type { QuestionGroup, RolloutPath, RolloutResult } from '../rl/types.js';
import { deriveSeed } from '../util/rng.js';
import { type AkbeFact, type FactEvent, type QuestionFact, reportFact } from './facts.js';
import { type RolloutInput, type RolloutLimits, rolloutMachine } from './rollout.js';

export class QuestionRolloutError extends Error {
  constructor(
    readonly questionId: string,
    readonly rolloutId: string,
    opts?: ErrorOptions,
  ) {
    super(`question ${questionId}: rollout ${rolloutId} failed`, opts);
    this.name = 'QuestionRolloutError';
  }
}

/** A question as the machines see it: prompts already tokenized by the world's templates. */
export interface QuestionSpec {
  id: string;
  gold: string[];
  /** The question text and its split (e.g. 'single-hop'), for the log only. */
  text?: string;
  split?: string;
  /** The world's oracle: are the facts it needs known to the base policy? (log only; absent: no oracle) */
  known?: boolean;
  /** Prompt of the with-tool template (tools described and allowed). */
  withToolPrompt: number[];
  /** Prompt of the no-tool template (answer from memory). */
  noToolPrompt: number[];
}

/** One question of one step: its prompts and gold answers, group sizes, limits, sampling and the run seed. */
export interface QuestionInput {
  runSeed: number;
  step: number;
  policyVersion: number;
  question: QuestionSpec;
  gWithTool: number;
  gNoTool: number;
  limits: RolloutLimits;
  sampling?: { temperature: number; topP: number };
}

export interface QuestionContext extends QuestionInput {
  pending: string[];
  results: RolloutResult[];
}

/** Rollout ids: unique per run, readable, subject- and dedup-id-safe. */
export function rolloutIdOf(step: number, questionId: string, path: RolloutPath, index: number): string {
  return rolloutIdUnder(`s${step}`, questionId, path, index);
}

/**
 * The one rollout id scheme, `<prefix>.<question>.wt<k>` / `.nt<k>`: a training step's prefix is
 * `s<step>` (rolloutIdOf), an evaluation's its own (eval-rollouts.ts).
 */
export function rolloutIdUnder(prefix: string, questionId: string, path: RolloutPath, index: number): string {
  return `${prefix}.${questionId}.${path === 'with-tool' ? 'wt' : 'nt'}${index}`;
}

/**
 * The one rollout fan-out: a question's rollouts on each path in `paths` order, `counts[path]` of
 * each, with their ids (`rolloutIdUnder(idPrefix, ...)`), prompts and seeds. Training steps
 * (rolloutInputs, with-tool first, seeds from the run's `rollout` stream) and evaluations and
 * offline targets (src/actors/rollout/eval-rollouts.ts, no-tool first, the `eval` stream) differ
 * only in these arguments. Pure.
 */
export interface FanOut {
  idPrefix: string;
  /** Events are keyed by it (0 for rollouts that are not a training step's). */
  step: number;
  question: Pick<QuestionSpec, 'id' | 'gold' | 'withToolPrompt' | 'noToolPrompt'>;
  paths: readonly RolloutPath[];
  counts: Readonly<Record<RolloutPath, number>>;
  policyVersion: number;
  seedOf: (path: RolloutPath, index: number) => number;
  limitsOf: (prompt: readonly number[]) => RolloutLimits;
  sampling?: { temperature: number; topP: number };
}

export function fanOut(f: FanOut): RolloutInput[] {
  const q = f.question;
  return f.paths.flatMap((path) =>
    Array.from({ length: f.counts[path] }, (_, index): RolloutInput => {
      const promptTokens = path === 'with-tool' ? q.withToolPrompt : q.noToolPrompt;
      return {
        step: f.step,
        questionId: q.id,
        rolloutId: rolloutIdUnder(f.idPrefix, q.id, path, index),
        index,
        path,
        policyVersion: f.policyVersion,
        promptTokens,
        gold: q.gold,
        seed: f.seedOf(path, index),
        limits: f.limitsOf(promptTokens),
        sampling: f.sampling,
      };
    }),
  );
}

/** The inputs of every rollout of a training step's question, with-tool first. Pure. */
export function rolloutInputs(q: QuestionInput): RolloutInput[] {
  return fanOut({
    idPrefix: `s${q.step}`,
    step: q.step,
    question: q.question,
    paths: ['with-tool', 'no-tool'],
    counts: { 'with-tool': q.gWithTool, 'no-tool': q.gNoTool },
    policyVersion: q.policyVersion,
    seedOf: (path, index) => deriveSeed(q.runSeed, 'rollout', q.step, q.question.id, path, index),
    limitsOf: () => q.limits,
    sampling: q.sampling,
  });
}

function groupOf(c: QuestionContext): QuestionGroup {
  const byIndex = (a: RolloutResult, b: RolloutResult) => a.index - b.index;
  return {
    questionId: c.question.id,
    step: c.step,
    policyVersion: c.policyVersion,
    gold: c.question.gold,
    withToolPrompt: c.question.withToolPrompt,
    withTool: c.results.filter((r) => r.path === 'with-tool').sort(byIndex),
    noTool: c.results.filter((r) => r.path === 'no-tool').sort(byIndex),
  };
}

type ChildDone = { type: `xstate.done.actor.${string}`; output: RolloutResult; actorId: string };
type ChildError = { type: `xstate.error.actor.${string}`; error: unknown; actorId: string };

/** A question's actor: fans out its with-tool and no-tool rollouts, collects them and reports the group. */
export const questionMachine = setup({
  types: {
    input: {} as QuestionInput,
    context: {} as QuestionContext,
    output: {} as QuestionGroup,
    events: {} as FactEvent | ChildDone | ChildError,
    emitted: {} as AkbeFact,
  },
  actors: { rollout: rolloutMachine },
  actions: {
    report: reportFact<AkbeFact>(),
    relay: enqueueActions(({ enqueue, event }) => {
      if (event.type === 'fact') enqueue({ type: 'report', params: (event as FactEvent).fact });
    }),
  },
  guards: {
    'allCollected?': ({ context }) => context.pending.length === 0,
  },
}).createMachine({
  id: 'question',
  context: ({ input }) => ({ ...input, pending: [], results: [] }),
  initial: 'rolling',
  states: {
    rolling: {
      entry: enqueueActions(({ enqueue, context }) => {
        const q = context.question;
        enqueue({
          type: 'report',
          params: {
            type: 'question.assigned',
            questionId: q.id,
            step: context.step,
            policyVersion: context.policyVersion,
            text: q.text ?? q.id,
            gold: q.gold,
            split: q.split ?? 'train',
            groupSize: { withTool: context.gWithTool, noTool: context.gNoTool },
            ...(q.known === undefined ? {} : { known: q.known }),
          } satisfies QuestionFact,
        });
        const inputs = rolloutInputs(context);
        enqueue.assign({ pending: inputs.map((i) => i.rolloutId) });
        for (const input of inputs) enqueue.spawnChild('rollout', { id: input.rolloutId, input });
      }),
      on: {
        fact: { actions: 'relay' },
        'xstate.done.actor.*': {
          actions: enqueueActions(({ enqueue, context, event }) => {
            const { actorId, output } = event as ChildDone;
            if (!context.pending.includes(actorId)) return;
            enqueue.assign({
              pending: context.pending.filter((id) => id !== actorId),
              results: [...context.results, output],
            });
            // A finished child stays in snapshot.children until stopped: release it and its tokens.
            enqueue.stopChild(actorId);
          }),
        },
        'xstate.error.actor.*': {
          actions: ({ context, event }) => {
            const { actorId, error } = event as ChildError;
            throw new QuestionRolloutError(context.question.id, actorId, { cause: error });
          },
        },
      },
      always: { guard: 'allCollected?', target: 'completed' },
    },
    completed: {
      type: 'final',
      entry: {
        type: 'report',
        params: ({ context }) =>
          ({ type: 'group.completed', group: groupOf(context) }) satisfies QuestionFact,
      },
    },
  },
  output: ({ context }) => groupOf(context),
});
