/**
 * Phases 1 and 2 of a run (orchestrator.ts), from the log and the files to a run ready to step:
 * where the run stands (the resume-point projection), what it needs loaded (questions, the
 * policy's context, tools, the search index), its pure setup (run-setup.ts), and run.started in the
 * log (a fresh run) or the crashed orchestrator's stale commands purged (a resumed one).
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { type AkbeEvent, createEvent, type TrainerRuntimeData } from '../../events/catalog.js';
import { messageKeyOf } from '../../events/message-key.js';
import { foldRun } from '../../events/projection.js';
import {
  lastCategories,
  type ResumePoint,
  resumedFrom,
  resumePoint,
} from '../../events/projections/resume-point.js';
import { defaultReplicas } from '../../events/streams.js';
import { signerOf } from '../../events/train-signature.js';
import { checkpointLimits } from '../../gpu/checkpoint.js';
import { ortVersion } from '../../gpu/session.js';
import { DEFAULT_OPTIMIZER } from '../../gpu/trainer.js';
import type { QuestionSpec } from '../../machines/question.js';
import type { TextEnvironment } from '../../text/environment.js';
import { DEFAULT_TOOLS, toolsNamed } from '../../tools/registry.js';
import { readQuestions } from '../../world/files.js';
import type { WorldQuestion } from '../../world/questions.js';
import { ensureWorldIndex } from '../../world/search-index.js';
import { baseManifestOf } from '../checkpoints/checkpoint-records.js';
import { CheckpointStore, type PublishedCheckpoint } from '../checkpoints/checkpoints.js';
import { DEFAULT_KEEP_CHECKPOINTS } from '../checkpoints/keep-checkpoints.js';
import { EventSink } from '../log/event-sink.js';
import { runEnvironment, searchIndexOf } from '../roles/roles.js';
import { ensureRolloutQueue, purgeRolloutCommands } from './dispatch.js';
import { type LoadedRun, type RunSetup, runSetup } from './run-setup.js';
import type { TrainingOptions } from './training-options.js';

export class ResumeError extends Error {
  constructor(
    readonly runId: string,
    message: string,
  ) {
    super(`run ${runId}: ${message}`);
    this.name = 'ResumeError';
  }
}

/** A world question as the machines see it (prompts tokenized with the world's templates). */
export function questionSpecOf(
  q: WorldQuestion,
  prompt: (path: 'with-tool' | 'no-tool', text: string) => number[],
): QuestionSpec {
  return {
    id: q.id,
    gold: q.golden_answers,
    text: q.question,
    split: `${q.split}/${q.hop}`,
    known: q.known,
    withToolPrompt: prompt('with-tool', q.question),
    noToolPrompt: prompt('no-tool', q.question),
  };
}

/** Phase 1: where the run stands (the resume-point projection), refusing what cannot go on. */
/**
 * Who decodes the rollouts, for run.started: 'embedded' (akbe's decoder, which batchInvariantDecode
 * makes bit-repeatable) or 'external' (an inference engine that batches as it likes: a seed does
 * not repeat the run bit for bit). Unknown (undefined) when the policy role runs in another process.
 */
function rolloutDecoder(o: TrainingOptions): 'embedded' | 'external' | undefined {
  if (o.roles && !o.roles.includes('policy')) return undefined;
  return o.engine ? 'external' : 'embedded';
}

/**
 * What the trainer of this process trains with, for run.started (a verifier refuses another
 * runtime): null when the trainer role runs in another process, whose settings this one cannot see.
 */
export function trainerRuntimeOf(
  o: Pick<TrainingOptions, 'roles' | 'device' | 'threads' | 'spec'>,
): TrainerRuntimeData | null {
  if (o.roles && !o.roles.includes('trainer')) return null;
  return {
    ortVersion: ortVersion(),
    executionProvider: o.device ?? 'cpu',
    intraOpThreads: o.threads ?? 0,
    hostCpus: availableParallelism(),
    optimizer: DEFAULT_OPTIMIZER,
    dtype: 'float32',
    batchInvariantDecode: o.spec.train.batchInvariantDecode,
  };
}

/**
 * A resumed run's trainer runtime against run.started's: a line naming what changed (the steps
 * from here train under it, and verification of them compares against another runtime's bits).
 */
function runtimeChangeNote(recorded: TrainerRuntimeData | null | undefined, now: TrainerRuntimeData | null) {
  if (!recorded || !now) return null;
  const changed = (Object.keys(now) as (keyof TrainerRuntimeData)[])
    .filter((k) => recorded[k] !== now[k])
    .map((k) => `${k} ${recorded[k]} -> ${now[k]}`);
  return changed.length
    ? `resume: the trainer runtime differs from run.started's (${changed.join(', ')}); the steps from here may not verify bit for bit`
    : null;
}

async function readResumePoint(o: TrainingOptions): Promise<ResumePoint> {
  const { state: point } = await foldRun(o.store, o.runId, resumePoint);
  if (!o.resume && point.runStarted)
    throw new ResumeError(
      o.runId,
      'already has events; pass --resume to continue it or pick another --run-id',
    );
  if (o.resume && !point.runStarted)
    throw new ResumeError(o.runId, 'has no run.started event to resume from');
  if (point.finished) throw new ResumeError(o.runId, 'is already finished');
  return point;
}

/** Phase 2: load what the run needs (questions, the policy's context, tools, the search index). */
async function loadRun(
  o: TrainingOptions,
  checkpoints: CheckpointStore,
  point: ResumePoint,
  log: (line: string) => void,
): Promise<LoadedRun & { env: TextEnvironment }> {
  const { spec } = o;
  // The world's questions as text, in the policy's environment: the world's prompts for the world
  // base, Search-R1's prompt in the chat template for a Hugging Face checkpoint.
  const env = await runEnvironment(spec);
  const questions = (await readQuestions(spec.worldDir, 'train')).map((q) =>
    questionSpecOf(q, (path, text) => env.promptIds(path, text)),
  );
  const from = o.resume ? resumedFrom(point) : null;
  const modelDir = from ? await checkpoints.local(from.version) : spec.basePolicy;
  const { context } = await checkpointLimits(modelDir);
  // The world's index is built once when missing; its fingerprint goes into run.started.
  const indexDir = searchIndexOf(spec);
  const meta = await ensureWorldIndex(spec.worldDir, indexDir, log);
  return {
    spec,
    questions,
    context,
    padId: env.padId,
    env,
    tools: toolsNamed(spec.tools ?? DEFAULT_TOOLS, { topK: spec.topK }),
    index: { dir: indexDir, fingerprint: meta.fingerprint },
    resume: from && { ...from, lastCategory: lastCategories(point) },
    akbeVersion: o.akbeVersion ?? '0.1.0',
  };
}

/** A run ready for its steps: what phases 1 and 2 opened, loaded and decided. */
export interface OpenedRun {
  checkpoints: CheckpointStore;
  loaded: LoadedRun & { env: TextEnvironment };
  setup: RunSetup;
  /** Where a resumed run continues; null for a fresh run. */
  resumed: { step: number; version: number } | null;
  sink: EventSink;
  /** The checkpoint of each policy version published so far in this process (v0: the base). */
  published: Map<number, PublishedCheckpoint>;
  /** Resolves when the checkpoints of versions out of `keepCheckpoints` are removed. */
  pruned: () => Promise<void>;
}

/**
 * Old checkpoints go once a newer version's policy.published is stored (from then on a resume
 * loads that version or a newer one), one prune at a time. A failed prune is a line, not a failed run.
 */
function checkpointPruner(checkpoints: CheckpointStore, keep: number, log: (line: string) => void) {
  let chain = Promise.resolve();
  return {
    stored: (e: AkbeEvent) => {
      if (e.type !== 'policy.published') return;
      const newest = e.data.version;
      chain = chain
        .then(() => checkpoints.prune(newest, keep))
        .then((removed) => {
          if (removed.length)
            log(
              `checkpoints: removed ${removed.map((v) => `v${v}`).join(', ')} (keepCheckpoints ${keep}, newest v${newest})`,
            );
        })
        .catch((err) => log(`checkpoints: pruning failed: ${(err as Error).message}`));
    },
    settled: () => chain,
  };
}

/** The sha256 the log recorded for each version (v0's in run.started): checkpoints are checked against it. */
function expectRecordedCheckpoints(checkpoints: CheckpointStore, point: ResumePoint): void {
  const config = point.runStarted?.data.config;
  const base = config?.basePolicySha256;
  if (typeof base === 'string') checkpoints.expect(0, base, baseManifestOf(config));
  for (const [version, sha256] of point.publishedSha)
    checkpoints.expect(version, sha256, point.publishedManifest.get(version) ?? null);
}

/** Phases 1 and 2, then the run's setup; run.started is in the log when this returns. */
export async function openRun(o: TrainingOptions, log: (line: string) => void): Promise<OpenedRun> {
  const { nc, store, runId } = o;
  const point = await readResumePoint(o);
  const checkpoints = await CheckpointStore.open(nc, runId, join(o.runDir, 'checkpoints'), { log });
  expectRecordedCheckpoints(checkpoints, point);
  // Keyed Nats-Msg-Ids: a message pre-published with an event's predictable id cannot pre-empt it.
  // The key comes from the orchestrator's own seed (no other role can compute its ids; a resume
  // with the same credentials gets the same ones), or the run's KV key without credentials.
  const messageKey = await messageKeyOf(runId, o.signingSeed, () => checkpoints.dedupeKey());
  store.useDedupeKey(runId, messageKey.key);
  await ensureRolloutQueue(store.jsm, runId, o.dispatch, defaultReplicas(nc));
  const loaded = await loadRun(o, checkpoints, point, log);
  const setup = runSetup(loaded);
  if (setup.note) log(setup.note);
  const resumed = loaded.resume && { step: loaded.resume.step, version: loaded.resume.version };
  if (resumed) {
    const purged = await purgeRolloutCommands(store.jsm, runId);
    log(
      `resume: run ${runId} at step ${resumed.step + 1}, policy v${resumed.version}; ${purged} stale rollout commands purged`,
    );
    const note = runtimeChangeNote(point.runStarted?.data.trainerRuntime, trainerRuntimeOf(o));
    if (note) log(note);
  }

  const pruner = checkpointPruner(checkpoints, o.spec.keepCheckpoints ?? DEFAULT_KEEP_CHECKPOINTS, log);
  const sink = new EventSink(store, { known: point.known, onStored: pruner.stored });
  const published = new Map<number, PublishedCheckpoint>();
  if (!resumed) {
    // Version 0 is the base policy: run.started's policyRef names it; policy.published is for the
    // versions training makes (step k publishes k+1).
    const base = await checkpoints.importBase(o.spec.basePolicy);
    published.set(0, base);
    // The base's sha256 in the log: a stored copy of v0 is checked against it like any version.
    const decoder = rolloutDecoder(o);
    const runStarted = {
      ...setup.runStarted,
      trainerRuntime: trainerRuntimeOf(o),
      trainSigner: o.signingSeed ? signerOf(o.signingSeed) : null,
      config: {
        ...setup.runStarted.config,
        basePolicySha256: base.sha256,
        // Every file of v0 (config, tokenizer, weights): loads of v0 check them all, as for the others.
        basePolicyManifest: base.manifest,
        ...(decoder ? { rolloutDecoder: decoder } : {}),
        // Whose secret keys the orchestrator's message ids (events/message-key.ts).
        messageIds: messageKey.scheme,
        // The CA the orchestrator pinned, or 'insecure' (--nats-insecure): what served the log.
        ...(o.natsTrust ? { natsTrust: o.natsTrust } : {}),
      },
    };
    sink.push(createEvent('run.started', runStarted, { runId, step: 0, policyVersion: 0 }));
  }
  await checkpoints.setStatus('running');
  await sink.flush();
  return { checkpoints, loaded, setup, resumed, sink, published, pruned: pruner.settled };
}
