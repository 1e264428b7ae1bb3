/**
 * offline-akbe's frozen rollouts (src/rl/algorithms/offline-akbe.ts): before step 0, the frozen
 * checkpoint (config `frozenPolicy`) rolls out every question the run's seed will draw
 * (sampleStepQuestions for each step), G_wt with-tool and G_nt no-tool rollouts each, through the
 * rollout machine with the run's limits, sampling and search service (evalRollouts with the policy
 * in this process), and each question's label and target are built once (src/rl/offline.ts).
 *
 * The records go into the log on each question.assigned (fact-events.ts), so a resumed run reads
 * back the ones its log holds (decoding is not bit-reproducible across batch compositions, so they
 * are never regenerated) and rolls out only the questions not recorded yet.
 *
 * `frozenPolicy` is a checkpoint directory, or `run:<run id>`: the last published version of that
 * finished run of the same akbe home (`<home>/runs/<id>/checkpoints/v<N>`, checked against the
 * sha256 its log recorded), e.g. an experiment's GRPO run.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { EventStore } from '../../events/store.js';
import { architecture } from '../../gpu/architecture.js';
import { PolicyRuntime } from '../../gpu/policy-runtime.js';
import { sampleStepQuestions } from '../../machines/run.js';
import { getAlgorithm } from '../../rl/algorithms/index.js';
import { type OfflineTarget, offlineTargetOf } from '../../rl/offline.js';
import type { RolloutResult } from '../../rl/types.js';
import type { TextEnvironment } from '../../text/environment.js';
import type { AnyTool } from '../../tools/tool.js';
import { deriveSeed } from '../../util/rng.js';
import { sha256Hex } from '../checkpoints/checkpoint-integrity.js';
import { CheckpointStore } from '../checkpoints/checkpoints.js';
import { coalescedGenerate, evalRollouts, localRolloutActors } from '../rollout/eval-rollouts.js';
import { natsServiceCall } from '../rollout/tool-calls.js';
import type { RunSetup } from './run-setup.js';
import type { TrainingOptions } from './training-options.js';

export class FrozenPolicyError extends Error {
  constructor(message: string, opts?: ErrorOptions) {
    super(`frozenPolicy: ${message}`, opts);
    this.name = 'FrozenPolicyError';
  }
}

const RUN_PREFIX = 'run:';

/** The frozen checkpoint's directory: the path itself, or `run:<id>`'s last published version. */
export async function frozenPolicyDir(
  frozen: string,
  o: Pick<TrainingOptions, 'nc' | 'store' | 'runDir'>,
): Promise<string> {
  if (!frozen.startsWith(RUN_PREFIX)) return frozen;
  const runId = frozen.slice(RUN_PREFIX.length);
  const last = await lastPublished(o.store, runId);
  const store = await CheckpointStore.open(o.nc, runId, join(dirname(o.runDir), runId, 'checkpoints'));
  store.expect(last.version, last.sha256, last.manifest);
  return store.local(last.version);
}

type Last = { version: number; sha256: string; manifest: Record<string, string> | null };
async function lastPublished(store: EventStore, runId: string): Promise<Last> {
  let status: string | null = null;
  for await (const { event } of store.replayType(runId, 'run.finished')) status = event.data.status;
  if (status !== 'completed')
    throw new FrozenPolicyError(
      `run ${runId} ${status === null ? 'has not finished' : `finished ${status}`}; its last checkpoint is the frozen policy, so it must complete first`,
    );
  let last: Last | null = null;
  for await (const { event } of store.replayType(runId, 'policy.published'))
    if (!last || event.data.version > last.version)
      last = {
        version: event.data.version,
        sha256: event.data.sha256,
        manifest: event.data.manifest ?? null,
      };
  if (!last) throw new FrozenPolicyError(`run ${runId} published no checkpoint`);
  return last;
}

/** The frozen policy must speak the run's tokens: its targets are trained as the run's sequences. */
async function checkSameVocabulary(dir: string, basePolicy: string): Promise<void> {
  const vocab = async (d: string) =>
    (JSON.parse(await readFile(join(d, 'config.json'), 'utf8')) as { vocab_size?: unknown }).vocab_size;
  const [frozen, base] = await Promise.all([vocab(dir), vocab(basePolicy)]);
  if (frozen !== base)
    throw new FrozenPolicyError(
      `${dir} has vocab_size ${frozen}, the run's base policy ${basePolicy} ${base}: the frozen checkpoint must share the run's tokenizer`,
    );
}

/** The offline records already in the run's log (a resumed run), by question. */
async function recordedTargets(store: EventStore, runId: string): Promise<Map<string, OfflineTarget>> {
  const out = new Map<string, OfflineTarget>();
  for await (const { event } of store.replayType(runId, 'question.assigned')) {
    const id = event.meta.questionId;
    if (id && event.data.offline && !out.has(id)) out.set(id, event.data.offline);
  }
  return out;
}

export interface OfflineTargetsDeps {
  env: TextEnvironment;
  tools: readonly AnyTool[];
  log: (line: string) => void;
}

/**
 * Every offline record the run needs (null when its algorithm takes none): the log's, then the
 * missing questions' from fresh frozen rollouts.
 */
export async function offlineTargets(
  o: TrainingOptions,
  setup: RunSetup,
  d: OfflineTargetsDeps,
): Promise<Record<string, OfflineTarget> | null> {
  const cfg = o.spec.train;
  if (getAlgorithm(cfg.algo).offlineTargets !== true) return null;
  if (!cfg.frozenPolicy) throw new FrozenPolicyError(`algo ${cfg.algo} needs config.frozenPolicy`);
  const input = setup.machineInput;
  const scheduled = new Map<string, (typeof input.questions)[number]>();
  for (let step = 0; step < input.steps; step++)
    for (const i of sampleStepQuestions(input.questions.length, input.batchQuestions, input.runSeed, step))
      scheduled.set(input.questions[i].id, input.questions[i]);
  const targets = await recordedTargets(o.store, o.runId);
  const missing = [...scheduled.values()].filter((q) => !targets.has(q.id));
  if (missing.length === 0) return Object.fromEntries(targets);

  const dir = await frozenPolicyDir(cfg.frozenPolicy, o);
  await checkSameVocabulary(dir, o.spec.basePolicy);
  const sha256 = sha256Hex(new Uint8Array(await readFile(join(dir, 'model.safetensors'))));
  for (const [id, t] of targets)
    if (t.checkpointSha256 !== sha256)
      throw new FrozenPolicyError(
        `${dir} (sha256 ${sha256.slice(0, 12)}) is not the checkpoint question ${id}'s recorded target came from (${t.checkpointSha256.slice(0, 12)})`,
      );
  const started = performance.now();
  const runtime = await PolicyRuntime.fromCheckpoint(dir, {
    device: o.device ?? 'cpu',
    intraOpThreads: o.threads,
    vocabPieces: d.env.stopStrings.length > 0 ? d.env.codec.pieces() : undefined,
  });
  let results: RolloutResult[];
  try {
    results = await evalRollouts(missing, {
      actors: localRolloutActors(
        d.env,
        coalescedGenerate((reqs) => runtime.generateBatch(reqs), 64),
        d.tools,
        natsServiceCall(o.nc, o.runId),
      ),
      limits: input.limits,
      context: architecture(runtime.config).maxPositions,
      temperature: cfg.temperature,
      topP: cfg.topP,
      samples: 0,
      samplesPerPath: { 'with-tool': cfg.gWithTool, 'no-tool': cfg.gNoTool },
      idPrefix: 'frozen',
      seed: deriveSeed(cfg.seed, 'offline-rollouts'),
      policyVersion: 0,
      concurrency: 64,
    });
  } finally {
    await runtime.close();
  }
  const byQuestion = new Map<string, RolloutResult[]>();
  for (const r of results) byQuestion.set(r.questionId, [...(byQuestion.get(r.questionId) ?? []), r]);
  const opts = {
    runSeed: cfg.seed,
    targetSelection: cfg.targetSelection,
    targetContext: cfg.targetContext,
    checkpointSha256: sha256,
  };
  for (const q of missing) targets.set(q.id, offlineTargetOf(q.id, byQuestion.get(q.id) ?? [], opts));
  const withTarget = missing.filter((q) => targets.get(q.id)!.target !== null).length;
  d.log(
    `offline-akbe: ${missing.length} questions rolled out by the frozen policy ${cfg.frozenPolicy} (sha256 ${sha256.slice(0, 12)}), ${withTarget} with a target, in ${((performance.now() - started) / 1000).toFixed(1)}s`,
  );
  return Object.fromEntries(targets);
}
