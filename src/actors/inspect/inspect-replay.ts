/**
 * Re-plays a finished run through its machines, for the inspector: the machines are pure, so the
 * run, question, rollout and learner machines are run again with actors that answer from the log
 * (each turn's recorded tokens, text and logprobs; each search's recorded observation; each train
 * step's recorded metrics and version). With an `inspect` observer attached, the inspector shows
 * the same transitions the run went through. The re-run doubles as a determinism check: every
 * fact the machines report again is compared with the recorded event (a Divergence otherwise).
 *
 * Needs `run.started.questionPoolSize` (to re-draw each step's questions with the recorded seed)
 * and `rollout.completed.segments` (the turn texts the rollout machine parses).
 */
import { createActor, fromPromise, type InspectionEvent, toPromise } from 'xstate';
import { recordedOfflineTargets } from '../../audit/offline-targets.js';
import { type AuditSettings, configOf, recomputeOutcome, settingsOf } from '../../audit/recompute.js';
import type { RolloutLog, RunLog, StepLog } from '../../audit/run-log.js';
import { seqOf } from '../../audit/run-log.js';
import { wholeTurnSpans } from '../../events/upcast.js';
import type { AkbeFact } from '../../machines/facts.js';
import { learnerMachine, type TrainRequest, type TrainResult } from '../../machines/learner.js';
import { type QuestionSpec, questionMachine } from '../../machines/question.js';
import {
  type GenerateRequest,
  type GenerateResult,
  rolloutMachine,
  type ToolRequest,
  type ToolResult,
} from '../../machines/rollout.js';
import { type RunInput, runMachine, sampleStepQuestions } from '../../machines/run.js';
import { parseTurn } from '../../rl/format.js';
import { toolCallTokenSpan } from '../../text/token-span.js';
import type { FinishReason } from '../../util/finish-reason.js';

/** The log lacks what a re-play needs (names the missing field and who records it). */
export class ReplayUnavailableError extends Error {
  constructor(message: string, opts?: ErrorOptions) {
    super(message, opts);
    this.name = 'ReplayUnavailableError';
  }
}

/** The re-run machines asked for something the log does not hold: the run did not replay. */
export class ReplayDivergenceError extends Error {
  constructor(message: string, opts?: ErrorOptions) {
    super(message, opts);
    this.name = 'ReplayDivergenceError';
  }
}

export interface Divergence {
  seq: number;
  what: string;
}

export interface ReplayResult {
  divergences: Divergence[];
  /** Facts the re-run machines reported. */
  facts: number;
  steps: number;
}

function rolloutsById(log: RunLog): Map<string, RolloutLog> {
  const m = new Map<string, RolloutLog>();
  for (const s of log.steps.values())
    for (const q of s.questions.values()) for (const r of q.rollouts.values()) m.set(r.rolloutId, r);
  return m;
}

/**
 * The run's question pool as far as the log shows it: each step's questions re-drawn with the
 * run machine's own draw (sampleStepQuestions) and put back at the pool index they came from,
 * with the prompts their rollouts recorded. Questions no step drew are placeholders.
 */
function questionPoolOf(steps: StepLog[], poolSize: number, runSeed: number): QuestionSpec[] {
  const pool: Array<QuestionSpec | null> = Array.from({ length: poolSize }, () => null);
  for (const step of steps) {
    const ids = step.started!.data.questionIds;
    const drawn = sampleStepQuestions(poolSize, ids.length, runSeed, step.step);
    ids.forEach((id, i) => {
      const q = step.questions.get(id);
      const done = [...(q?.rollouts.values() ?? [])].flatMap((r) => (r.completed ? [r.completed] : []));
      const prompt = (path: string) =>
        Array.from(done.find((d) => d.data.path === path)?.data.promptTokenIds ?? [0]);
      pool[drawn[i]] ??= {
        id,
        gold: q?.assigned?.data.goldAnswers ?? ['?'],
        text: q?.assigned?.data.text,
        split: q?.assigned?.data.split,
        withToolPrompt: prompt('with-tool'),
        noToolPrompt: prompt('no-tool'),
      };
    });
  }
  return pool.map((q, i) => q ?? { id: `unused-${i}`, gold: ['-'], withToolPrompt: [0], noToolPrompt: [0] });
}

/** The run machine's input, rebuilt from the log: the question pool is re-drawn step by step. */
export function runInputFromLog(log: RunLog): RunInput {
  const started = log.started;
  if (!started) throw new ReplayUnavailableError('the run has no run.started event: nothing to re-play');
  const s = settingsOf(started);
  const cfg = configOf(started);
  const poolSize = s.questionPoolSize;
  if (poolSize === undefined)
    throw new ReplayUnavailableError(
      "run.started.questionPoolSize is not recorded, so the steps' question draws cannot be repeated (the event sink of akbe train fills it)",
    );
  const steps = [...log.steps.values()].filter((x) => x.started && x.learner);
  const textless = steps
    .flatMap((x) => [...x.questions.values()])
    .flatMap((q) => [...q.rollouts.values()])
    .find((r) => r.completed && !r.completed.data.segments);
  if (textless)
    throw new ReplayUnavailableError(
      `rollout.completed.segments is not recorded (first: ${textless.rolloutId} at seq ${seqOf(textless.completed)}), so the rollout machines have no turn texts to parse (the event sink of akbe train writes them)`,
    );
  const batch = steps[0]?.started?.data.questionIds.length ?? (cfg.batchQuestions as number);
  const pool = questionPoolOf(steps, poolSize, s.runSeed);
  const group = steps[0]?.questions.values().next().value?.assigned?.data.groupSize;
  return {
    runSeed: s.runSeed,
    // Absolute step numbers: a resumed run's log may start past step 0.
    steps: (steps.at(-1)?.step ?? -1) + 1,
    initialStep: steps[0]?.step ?? 0,
    questions: pool,
    batchQuestions: batch,
    gWithTool: group?.withTool ?? (cfg.gWithTool as number),
    gNoTool: group?.noTool ?? (cfg.gNoTool as number),
    limits: {
      maxToolCalls: s.maxToolCalls,
      maxResponseTokens: s.maxResponseTokens,
      ...(s.toolTags ? { toolTags: s.toolTags } : {}),
    },
    sampling: {
      temperature: typeof cfg.temperature === 'number' ? cfg.temperature : 1,
      topP: typeof cfg.topP === 'number' ? cfg.topP : 1,
    },
    learner: {
      miniBatchQuestions: s.miniBatchQuestions,
      algo: s.algo,
      algoOptions: s.algoOptions,
      advantage: s.advantage,
      targetSelection: s.targetSelection,
      targetContext: s.targetContext,
      akbeAggregation: s.akbeAggregation,
      toolCallCount: s.toolCallCount,
      losses: [],
      padId: s.padId,
      padTo: s.padTo,
      offlineTargets: recordedOfflineTargets(log),
    },
    initialVersion: steps[0]?.started?.data.policyVersion ?? 0,
    // Asynchronous: step j trains from version j, and rolls out on max(0, j - η) (src/rl/staleness.ts).
    ...(s.maxStaleness > 0
      ? {
          maxStaleness: s.maxStaleness,
          initialVersion: steps[0]?.learner?.data.policyVersionBefore ?? steps[0]?.step ?? 0,
        }
      : {}),
  };
}

/**
 * The machines with actors that answer from the log. They read memory only, so there is no work
 * to cut short; like every injected actor they take xstate's signal, and a stopped replay answers
 * nothing more.
 */
export function recordedMachines(log: RunLog, opts: Pick<ReplayOptions, 'turnText'> = {}) {
  const rollouts = rolloutsById(log);
  const find = (rolloutId: string) => {
    const r = rollouts.get(rolloutId);
    if (!r?.completed) throw new ReplayDivergenceError(`rollout ${rolloutId} is not in the log`);
    return { r, done: r.completed };
  };
  const generate = recordedGenerate(find, settingsOf(log.started).toolTags, opts.turnText);
  const callTool = recordedToolCall(find);
  const train = recordedTrain(log);
  return runMachine.provide({
    actors: {
      question: questionMachine.provide({
        actors: { rollout: rolloutMachine.provide({ actors: { generate, callTool } }) },
      }),
      learner: learnerMachine.provide({ actors: { train } }),
    },
  });
}

type FindRollout = (rolloutId: string) => { r: RolloutLog; done: NonNullable<RolloutLog['completed']> };

/** The generate actor of a re-play: each turn's tokens, logprobs and call span from the log. */
function recordedGenerate(
  find: FindRollout,
  toolTags: readonly string[] | undefined,
  turnText: ReplayOptions['turnText'],
) {
  // Whether a rollout's spans are v2-shaped, once per rollout (not once per turn).
  const legacyOf = new Map<string, boolean>();
  const legacy = (rolloutId: string, d: Parameters<typeof legacySpans>[0]) => {
    const known = legacyOf.get(rolloutId);
    if (known !== undefined) return known;
    const v = legacySpans(d);
    legacyOf.set(rolloutId, v);
    return v;
  };
  return fromPromise<GenerateResult, GenerateRequest>(async ({ input, signal }) => {
    signal.throwIfAborted();
    const { r, done } = find(input.rolloutId);
    const turn = r.turns.find((x) => x.data.turn === input.turn);
    const text = done.data.segments?.filter((x) => x.kind === 'generated')[input.turn]?.text;
    if (!turn || text === undefined)
      throw new ReplayDivergenceError(
        `rollout ${input.rolloutId} asked for turn ${input.turn}; the log has ${r.turns.length}`,
      );
    const tokens = Array.from(turn.data.tokenIds);
    const offset = input.tokens.length - done.data.promptTokenIds.length;
    const logprobs = Array.from(done.data.oldLogprobs.subarray(offset, offset + tokens.length));
    const stopped = parseTurn(text, toolTags).kind !== 'none';
    const finish: FinishReason =
      tokens.length >= input.maxNewTokens && !stopped ? 'length' : stopped ? 'stop_string' : 'stop_token';
    // The call's span as recorded (response coordinates -> the turn's). An upcast v2 log records
    // none for a call refused by the limit (its old rule counted calls before observations only):
    // the whole turn stands in, as that rule would have read it (the reward is 0 either way).
    if (turnText && !legacy(input.rolloutId, done.data)) {
      // With the run's tokenizer the span is derived from the turn's tokens as the live generate
      // actor derives it (rollout-actors.ts turnResult), so a forged one diverges.
      const derived = toolCallTokenSpan(
        tokens.length,
        (k) => turnText(tokens.slice(0, k), input.turn),
        toolTags,
      );
      return { tokens, logprobs, text, finish, ...(derived ? { callSpan: derived } : {}) };
    }
    const recorded = done.data.toolCallSpans.find(([s]) => s >= offset && s < offset + tokens.length);
    const callSpan: [number, number] = recorded
      ? [recorded[0] - offset, recorded[1] - offset]
      : [0, tokens.length];
    return { tokens, logprobs, text, finish, ...(tokens.length > 0 ? { callSpan } : {}) };
  });
}

/** The tool-call actor of a re-play: each call's observation and record from the log. */
function recordedToolCall(find: FindRollout) {
  return fromPromise<ToolResult, ToolRequest>(async ({ input, signal }) => {
    signal.throwIfAborted();
    const { r, done } = find(input.rolloutId);
    const tool = r.tools.find((x) => x.data.turn === input.turn);
    const text = done.data.segments?.filter((x) => x.kind === 'observation')[input.call - 1]?.text;
    if (!tool || text === undefined)
      throw new ReplayDivergenceError(
        `rollout ${input.rolloutId} called <${input.tag}> at turn ${input.turn}; the log has no such call`,
      );
    const d = tool.data;
    return {
      tool: d.tool,
      tokens: Array.from(d.observationTokenIds),
      text,
      record: d.record,
      latencyMs: d.latencyMs,
      error: d.error,
    };
  });
}

/** The train actor of a re-play: each step's versions and metrics from its learner.step. */
function recordedTrain(log: RunLog) {
  return fromPromise<TrainResult, TrainRequest>(async ({ input, signal }) => {
    signal.throwIfAborted();
    const learner = log.steps.get(input.step)?.learner;
    if (!learner)
      throw new ReplayDivergenceError(
        `step ${input.step} was trained, but the log has no learner.step for it`,
      );
    const { categoryCounts: _c, tp, ...scalars } = learner.data.metrics;
    return {
      version: learner.data.policyVersionAfter,
      metrics: { ...scalars, ...(tp === null ? {} : { tp }) },
      checkpoint: log.published.get(learner.data.policyVersionAfter)?.data.checkpoint,
    };
  });
}

/**
 * Spans shaped as a v2 log's upcast derives them (src/events/upcast.ts: the whole generated run
 * before each observation): read as recorded, not re-derived. A writer gains nothing by faking
 * this shape: a whole turn holds its query, so beta-GRPO's minimum over it is no higher, and the
 * one call it leaves out, a call refused by the limit, ends a rollout whose reward is 0.
 */
function legacySpans(d: { toolCallSpans: Array<[number, number]>; lossMask: ArrayLike<number> }): boolean {
  return sameSpans(d.toolCallSpans, wholeTurnSpans(d.lossMask));
}

const sameSpans = (
  a: ReadonlyArray<readonly [number, number]>,
  b: ReadonlyArray<readonly [number, number]>,
) => a.length === b.length && a.every(([s, e], i) => s === b[i][0] && e === b[i][1]);

/** Compares what the re-run machines reported with what was recorded. */
function compareFact(
  log: RunLog,
  rollouts: Map<string, RolloutLog>,
  limits: Pick<AuditSettings, 'maxToolCalls' | 'toolTags'>,
  f: AkbeFact,
  out: Divergence[],
  /** The re-run derived the tool-call spans from the tokens (ReplayOptions.turnText). */
  spansDerived: boolean,
): void {
  const differ = (seq: number, what: string) => out.push({ seq, what });
  if (f.type === 'step.started') {
    const e = log.steps.get(f.step)?.started;
    if (e && e.data.questionIds.join() !== f.questionIds.join())
      differ(
        seqOf(e),
        `step ${f.step} drew ${f.questionIds.join(',')}, recorded ${e.data.questionIds.join(',')}`,
      );
    if (e && e.data.policyVersion !== f.policyVersion)
      differ(seqOf(e), `step ${f.step} opened on v${f.policyVersion}, recorded v${e.data.policyVersion}`);
  } else if (f.type === 'rollout.completed') {
    const r = f.result;
    const e = rollouts.get(r.rolloutId)?.completed;
    if (!e) {
      differ(0, `rollout ${r.rolloutId} ran again but is not in the log`);
      return;
    }
    const d = e.data;
    const gold = log.steps.get(e.meta.step)?.questions.get(r.questionId)?.assigned?.data.goldAnswers ?? [];
    // The reward is compared with the audit's recomputation (a wrong RECORDED reward is the audit's finding).
    const expected = recomputeOutcome(e, gold, limits);
    const same =
      r.toolCalls === d.toolCalls &&
      r.stopReason === d.stopReason &&
      r.answer === d.answer &&
      r.responseTokens.length === d.responseTokenIds.length &&
      r.responseTokens.every((x, i) => x === d.responseTokenIds[i]) &&
      r.responseMask.every((x, i) => x === d.lossMask[i]);
    if (!same || r.reward !== expected.reward)
      differ(
        seqOf(e),
        `rollout ${r.rolloutId} re-ran to ${r.stopReason}/${r.toolCalls} calls/answer ${JSON.stringify(r.answer)}/reward ${r.reward}, recorded ${d.stopReason}/${d.toolCalls}/${JSON.stringify(d.answer)}/${d.reward}`,
      );
    else if (spansDerived && !sameSpans(r.toolCallSpans, d.toolCallSpans) && !legacySpans(d))
      differ(
        seqOf(e),
        `rollout ${r.rolloutId}'s tool-call spans re-derive to ${JSON.stringify(r.toolCallSpans)}, recorded ${JSON.stringify(d.toolCallSpans)}`,
      );
  } else if (f.type === 'boundary.labeled') {
    const e = log.steps.get(f.step)?.questions.get(f.label.questionId)?.label;
    const target = f.label.target?.rolloutId ?? null;
    if (e && (e.data.category !== f.label.category || e.data.targetRolloutId !== target))
      differ(
        seqOf(e),
        `question ${f.label.questionId} step ${f.step} re-labelled ${f.label.category} -> ${target}, recorded ${e.data.category} -> ${e.data.targetRolloutId}`,
      );
  }
}

export interface ReplayOptions {
  inspect?: (event: InspectionEvent) => void;
  /**
   * The run's turn decoding (its TextEnvironment's turnText): each tool call's token span is then
   * re-derived from the turn's tokens instead of read from the log, and a recorded span that
   * differs (one moved onto confident tokens to dodge beta-GRPO's gate) is a divergence.
   */
  turnText?: (ids: readonly number[], turn: number) => string;
}

/** Re-runs the run's machines from the log, with `inspect` attached when given. */
export async function replayRun(log: RunLog, opts: ReplayOptions = {}): Promise<ReplayResult> {
  const input = runInputFromLog(log);
  const actor = createActor(recordedMachines(log, opts), { input, inspect: opts.inspect });
  const divergences: Divergence[] = [];
  const rollouts = rolloutsById(log);
  let facts = 0;
  actor.on('*', (f) => {
    facts++;
    compareFact(log, rollouts, input.limits, f as AkbeFact, divergences, opts.turnText !== undefined);
  });
  actor.start();
  try {
    const out = await toPromise(actor);
    return { divergences, facts, steps: out.steps };
  } catch (err) {
    const cause = (err as Error).cause as Error | undefined;
    const reason =
      cause?.cause instanceof Error ? cause.cause.message : (cause?.message ?? (err as Error).message);
    divergences.push({ seq: 0, what: `the re-run stopped: ${reason}` });
    return { divergences, facts, steps: 0 };
  } finally {
    actor.stop();
  }
}
