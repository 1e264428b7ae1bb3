/**
 * Evaluation rollouts through the rollout machine (src/machines/rollout.ts), the same environment
 * training rolls out in: the same tag grammar and search-call parsing, the same tool-call limit and
 * the same response budget with observation truncation, scored by the same reward. Only the actors
 * differ by where the policy and the tools live: over NATS in a run (`remoteRolloutActors`, the
 * run's policy service and search service) or in this process for `akbe eval` (`localRolloutActors`:
 * a PolicyRuntime, the world's lexical search).
 *
 * Modes: greedy (temperature 0, one sample) or sampled (k samples per question and path at a
 * temperature); src/world/eval.ts reports the mean over samples and pass@k.
 */
import { createActor, fromPromise, toPromise } from 'xstate';
import type { GenerateRequest as DecodeRequest, GenerateResult as DecodeResult } from '../../gpu/decoder.js';
import { fanOut } from '../../machines/question.js';
import {
  type GenerateRequest,
  type GenerateResult,
  type RolloutLimits,
  rolloutMachine,
} from '../../machines/rollout.js';
import type { RolloutPath, RolloutResult } from '../../rl/types.js';
import type { TextEnvironment } from '../../text/environment.js';
import type { AnyTool, ServiceCall } from '../../tools/tool.js';
import { abortable } from '../../util/abortable.js';
import { deriveSeed } from '../../util/rng.js';
import { envToolCallActor, toolTagsOf, turnDecodeRequest, turnResult } from './rollout-actors.js';

/** A question as the evaluation rolls it out (prompts already in the policy's environment). */
export interface EvalQuestionSpec {
  id: string;
  gold: string[];
  withToolPrompt: number[];
  noToolPrompt: number[];
}

/** The two effects a rollout machine needs (remoteRolloutActors or localRolloutActors). */
export interface RolloutActors {
  generate: ReturnType<typeof fromPromise<GenerateResult, GenerateRequest>>;
  callTool: ReturnType<typeof envToolCallActor>;
}

export interface EvalRolloutOptions {
  actors: RolloutActors;
  /** The run's limits; maxResponseTokens is further cut per question to what the context leaves. */
  limits: RolloutLimits;
  /** The policy's context (prompt + response must fit it). */
  context: number;
  /** 0 = greedy. */
  temperature: number;
  topP?: number;
  /** Rollouts per question and path (k). */
  samples: number;
  /** Per path instead of `samples` (offline-akbe's frozen rollouts: G_wt and G_nt). */
  samplesPerPath?: Readonly<Record<RolloutPath, number>>;
  /** The rollout ids' first part (default 'eval'): `<prefix>.<question>.wt<k>` / `.nt<k>`. */
  idPrefix?: string;
  seed: number;
  policyVersion: number;
  /** Rollouts in flight at once (the policy batches what arrives together). */
  concurrency?: number;
  onDone?: (done: number, total: number) => void;
}

/** Rolls out every question on both paths, `samples` times each, in question order. Deterministic for a seed. */
export async function evalRollouts(
  questions: readonly EvalQuestionSpec[],
  o: EvalRolloutOptions,
): Promise<RolloutResult[]> {
  const machine = rolloutMachine.provide({ actors: o.actors });
  // The one fan-out (machines/question.ts), no-tool first, seeded from the `eval` stream; the
  // response budget cut per question to what the context leaves after its prompt.
  const jobs = questions.flatMap((q) =>
    fanOut({
      idPrefix: o.idPrefix ?? 'eval',
      step: 0, // not a training step: an evaluation's rollouts become no rollout events
      question: q,
      paths: ['no-tool', 'with-tool'],
      counts: {
        'no-tool': o.samplesPerPath?.['no-tool'] ?? o.samples,
        'with-tool': o.samplesPerPath?.['with-tool'] ?? o.samples,
      },
      policyVersion: o.policyVersion,
      seedOf: (path, k) => deriveSeed(o.seed, 'eval', q.id, path, k),
      limitsOf: (prompt) => ({
        ...o.limits,
        maxResponseTokens: Math.max(1, Math.min(o.limits.maxResponseTokens, o.context - prompt.length)),
      }),
      sampling: { temperature: o.temperature, topP: o.topP ?? 1 },
    }),
  );
  const out = new Array<RolloutResult>(jobs.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      const actor = createActor(machine, { input: jobs[i] });
      const result = toPromise(actor);
      actor.start();
      out[i] = await result;
      o.onDone?.(++done, jobs.length);
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency ?? 64, jobs.length) }, worker));
  return out;
}

/**
 * Rollout actors in this process: the policy's `generate` (a PolicyRuntime joins concurrent
 * requests into its running batch) and the tools through `service` (e.g. the world's search).
 */
export function localRolloutActors(
  env: TextEnvironment,
  generate: (req: DecodeRequest) => Promise<DecodeResult>,
  tools: readonly AnyTool[],
  service: ServiceCall,
): RolloutActors {
  const toolTags = toolTagsOf(tools);
  return {
    generate: fromPromise<GenerateResult, GenerateRequest>(async ({ input, signal }) => {
      const r = await abortable(generate(turnDecodeRequest(input, env)), signal);
      return turnResult(env, input, r.tokens, r.policyLogprobs, r.finishReason === 'length', toolTags);
    }),
    callTool: envToolCallActor(tools, service, env),
  };
}

/**
 * One `generate(req)` from many rollouts, decoded in static batches: the requests that arrive
 * before the next turn of the event loop go to `generateBatch` together (at most `maxBatch`), and
 * one batch runs at a time. For evaluation's short turns this measured faster than the runtime's
 * continuous batching (full dev split, 2 samples: 8 s vs 12 s).
 */
export function coalescedGenerate(
  generateBatch: (reqs: DecodeRequest[]) => Promise<DecodeResult[]>,
  maxBatch: number,
): (req: DecodeRequest) => Promise<DecodeResult> {
  type Pending = { req: DecodeRequest; resolve: (r: DecodeResult) => void; reject: (e: unknown) => void };
  let queue: Pending[] = [];
  let running: Promise<void> | null = null;
  let scheduled = false;
  const run = async () => {
    while (queue.length > 0) {
      const batch = queue.slice(0, maxBatch);
      queue = queue.slice(batch.length);
      try {
        const out = await generateBatch(batch.map((p) => p.req));
        batch.forEach((p, i) => {
          p.resolve(out[i]);
        });
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
      // Let the rollouts this batch answered ask for their next turn before the next batch.
      await new Promise((r) => setImmediate(r));
    }
    running = null;
  };
  return (req) =>
    new Promise((resolve, reject) => {
      queue.push({ req, resolve, reject });
      if (running || scheduled) return;
      scheduled = true;
      setImmediate(() => {
        scheduled = false;
        if (!running) running = run();
      });
    });
}
