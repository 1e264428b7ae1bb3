/**
 * The roles a process can play for a run, each a NATS participant that can run anywhere:
 *
 *   search   svc.search (queue `search`): the run's hnswlib index (default: the world's) behind src/retrieval's service
 *   policy   svc.generate (queue `policy`): a policy in a worker thread, version on demand
 *   trainer  svc.train (queue `trainer`): the training step in a policy worker thread
 *   rollout  the run's rollout work queue (dispatch.ts): rollout machines calling the above
 *
 * `akbe worker --role R` starts one (or `all`); `akbe train` starts all of them in its own process
 * unless told not to, so one process stays the embedded default. In one process of a synchronous
 * run the policy and the trainer share one PolicyHandle: a training step moves the serving policy
 * in place. An asynchronous run (maxStaleness >= 1) gives the trainer a worker thread of its own
 * (a second copy of the weights): an update then never stalls the decode steps of the steps still
 * rolling out, and the policy takes each new version from its local checkpoint (new parameters
 * into the running sessions, no rebuild).
 *
 * Everything a role needs to know about a run is in the run's `run.started` event (RunSpec).
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { InspectionEvent } from 'xstate';
import { lastEventOf } from '../../events/last-event.js';
import { messageKeyOf } from '../../events/message-key.js';
import type { EventStore } from '../../events/store.js';
import { checkpointLimits } from '../../gpu/checkpoint.js';
import { PolicyHost } from '../../gpu/policy-host.js';
import type { DeviceChoice } from '../../gpu/session.js';
import { loadRecordedPlugins, type PluginRef, pluginRefsOf } from '../../plugins/plugins.js';
import { IndexSearcher } from '../../retrieval/searcher.js';
import { DEFAULT_TRAIN_CONFIG, type TrainConfig, validateTrainConfig } from '../../rl/config.js';
import { CompletionsClient } from '../../serve/completions-client.js';
import { loadEnvironment, stopPieces, type TextEnvironment } from '../../text/environment.js';
import { DEFAULT_TOOLS } from '../../tools/registry.js';
import { readWorldTokenizer } from '../../world/files.js';
import { IndexFingerprintError, TRAINING_SEARCH_EF, worldIndexDir } from '../../world/search-index.js';
import type { CheckpointStore } from '../checkpoints/checkpoints.js';
import { keepCheckpointsProblem } from '../checkpoints/keep-checkpoints.js';
import { RolloutWorker } from '../rollout/rollout-worker.js';
import { type EngineSync, ExternalPolicy } from '../services/policy/external-policy.js';
import { PolicyHandle, PolicyService, type ServedPolicy } from '../services/policy/policy-service.js';
import { SearchService } from '../services/search/search-service.js';
import { TrainerService } from '../services/trainer/trainer-service.js';
import { trainerOptionsOf } from './trainer-options.js';

export const ROLES = ['rollout', 'policy', 'search', 'trainer'] as const;
export type Role = (typeof ROLES)[number];

/** What every role reads from `run.started.config`. */
export interface RunSpec {
  train: TrainConfig;
  worldDir: string;
  basePolicy: string;
  /** Passages per search. */
  topK: number;
  /** The tools the with-tool path may call, by registered name (default: search; src/tools/registry.ts). */
  tools?: string[];
  /** The search index directory (default: the world's, `<world>/index`). */
  index?: string;
  /** The index's fingerprint when the run started; the search role refuses another. */
  indexFingerprint?: string;
  /**
   * The dev evaluation `akbe train` runs before and after (questions per split, 0 = none).
   * Recorded in run.started so a resumed run evaluates as it was started (undefined: a log from
   * before it was recorded).
   */
  eval?: EvalSettings;
  /** Policy versions kept on disk and in the object store (checkpoints.ts; default 5, 0 = all). */
  keepCheckpoints?: number;
  /** The plugins the run loaded (src/plugins), recorded with their sha256. */
  plugins?: PluginRef[];
}

export type EvalSplit = 'train' | 'dev' | 'test';

export interface EvalSettings {
  questions: number;
  splits: EvalSplit[];
}

/** The run's search index directory. */
export function searchIndexOf(spec: RunSpec): string {
  return spec.index ?? worldIndexDir(spec.worldDir);
}

/** The search service over the run's index, refusing one whose fingerprint is not the run's. */
export async function startSearchRole(
  nc: NatsConnection,
  runId: string,
  spec: RunSpec,
  opts: { searchLatencyMs?: number } = {},
): Promise<SearchService> {
  const dir = searchIndexOf(spec);
  // A world-sized lexical index is searched exactly (its inverted view); others by the HNSW graph.
  const searcher = await IndexSearcher.open(dir, { ef: TRAINING_SEARCH_EF, exact: true });
  try {
    if (spec.indexFingerprint !== undefined && searcher.meta.fingerprint !== spec.indexFingerprint)
      throw new IndexFingerprintError(dir, searcher.meta.fingerprint, spec.indexFingerprint);
  } catch (err) {
    await searcher.close();
    throw err;
  }
  const service = SearchService.start(nc, searcher, { runId, searchLatencyMs: opts.searchLatencyMs });
  const stop = service.stop.bind(service);
  service.stop = async () => {
    await stop();
    await searcher.close();
  };
  return service;
}

export interface PolicyRoleOptions {
  device?: DeviceChoice;
  threads?: number;
  /** Token id -> text piece, for stop strings (a Hugging Face policy's `</search>` spans tokens). */
  vocabPieces?: string[];
}

/** The text environment of a run's policy: the world's, or Search-R1's over its HF tokenizer. */
export async function runEnvironment(spec: RunSpec): Promise<TextEnvironment> {
  return loadEnvironment(spec.basePolicy, () => readWorldTokenizer(spec.worldDir));
}

/** A policy in a worker thread at `version` (from the checkpoint store). */
export async function startPolicyHandle(
  checkpoints: CheckpointStore,
  spec: RunSpec,
  version: number,
  opts: PolicyRoleOptions & { decodes?: boolean } = {},
): Promise<PolicyHandle> {
  const dir = await checkpoints.local(version);
  const { context, vocabSize } = await checkpointLimits(dir);
  const host = await PolicyHost.start({
    checkpoint: dir,
    device: opts.device ?? 'cpu',
    intraOpThreads: opts.threads,
    vocabPieces: opts.vocabPieces,
    batchInvariant: spec.train.batchInvariantDecode,
    trainer: trainerOptionsOf(spec.train),
  });
  const handle = new PolicyHandle(
    host,
    version,
    checkpoints,
    context,
    vocabSize,
    spec.train.maxStaleness + 1,
    opts.decodes ?? true,
  );
  await handle.hold();
  return handle;
}

export interface StartedRoles extends AsyncDisposable {
  policy?: PolicyHandle;
  /** The trainer's policy: `policy` itself, or its own thread in an asynchronous run (see the top). */
  trainer?: PolicyHandle;
  rollout?: RolloutWorker;
  stop(): Promise<void>;
}

/** An external inference engine that answers svc.generate (external-policy.ts). */
export interface EngineOptions {
  /** Its OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1. */
  url: string;
  /** How new policy versions reach it (default 'disk'). */
  sync?: EngineSync;
  apiKey?: string;
  /** The model id to request (default: the first it lists). */
  model?: string;
}

/** svc.generate's policy: the engine's when one is given, else the embedded one. */
async function servedPolicy(
  spec: RunSpec,
  checkpoints: CheckpointStore,
  embedded: () => Promise<PolicyHandle>,
  version: number,
  o: RoleOptions,
): Promise<ServedPolicy> {
  if (!o.engine) return embedded();
  if (spec.train.maxStaleness > 0)
    throw new Error(
      'an external engine serves one policy version at a time; maxStaleness >= 1 needs the embedded policy',
    );
  // batchInvariantDecode (on by default) is a setting of akbe's own decoder: the engine batches
  // as it likes, so the run is not bit-repeatable; refusing would fail every default config.
  if (spec.train.batchInvariantDecode)
    o.log?.(
      "policy: batchInvariantDecode applies to akbe's own decoder only; the external engine batches as it likes, so this run will not repeat bit for bit",
    );
  return ExternalPolicy.connect({
    client: new CompletionsClient(o.engine.url, { apiKey: o.engine.apiKey, model: o.engine.model }),
    sync: o.engine.sync ?? 'disk',
    version,
    checkpointDir: (v) => checkpoints.local(v),
    log: o.log,
  });
}

export interface RoleOptions extends PolicyRoleOptions {
  /** The run's text environment when the caller has read it already (default: read from the spec). */
  environment?: TextEnvironment;
  /** Answer svc.generate from an external engine instead of the embedded policy. */
  engine?: EngineOptions;
  /** The search service's reply delay (a benchmark and testing knob, SearchServiceOptions). */
  searchLatencyMs?: number;
  concurrency?: number;
  /** Policy version the policy/trainer roles start at (default: the run's current version). */
  version?: number;
  inspect?: (event: InspectionEvent) => void;
  log?: (line: string) => void;
  /** The orchestrator's public nkey (U...): the trainer trains only on requests it signed. */
  trainSigner?: string;
  /** The seed of the credentials this process connected with: it keys the rollout role's message ids. */
  credentialSeed?: Uint8Array;
}

/** Starts `roles` for a run in this process (policy and trainer share one policy when both run). */
export async function startRoles(
  nc: NatsConnection,
  js: JetStreamClient,
  store: EventStore,
  checkpoints: CheckpointStore,
  runId: string,
  spec: RunSpec,
  roles: readonly Role[],
  opts: RoleOptions = {},
): Promise<StartedRoles> {
  const stops: Array<() => Promise<void>> = [];
  const started: StartedRoles = {
    stop: async () => {
      for (const s of stops.reverse()) await s().catch(() => undefined);
      stops.length = 0;
    },
    [Symbol.asyncDispose]: () => started.stop(),
  };
  // Read once (a Hugging Face tokenizer.json is ~11 MB) and only by the roles that need it.
  let env: Promise<TextEnvironment> | undefined;
  const environment = () => {
    env ??= opts.environment ? Promise.resolve(opts.environment) : runEnvironment(spec);
    return env;
  };
  try {
    if (roles.includes('search')) {
      const s = await startSearchRole(nc, runId, spec, opts);
      stops.push(() => s.stop());
    }
    if (roles.includes('policy') || roles.includes('trainer')) {
      const version = opts.version ?? (await checkpoints.currentVersion()) ?? 0;
      // The embedded policy, started at most once: the trainer's, and svc.generate's unless an
      // engine answers it (then the trainer publishes versions the engine loads).
      let handle: PolicyHandle | undefined;
      const embedded = async () => {
        if (!handle) {
          const h = await startPolicyHandle(checkpoints, spec, version, {
            ...opts,
            vocabPieces: stopPieces(await environment()),
          });
          handle = started.policy = h;
          stops.push(() => h.host.close());
        }
        return handle;
      };
      if (roles.includes('policy')) {
        const s = new PolicyService(
          nc,
          runId,
          await servedPolicy(spec, checkpoints, embedded, version, opts),
        );
        stops.push(() => s.stop());
      }
      if (roles.includes('trainer')) {
        const asynchronous = spec.train.maxStaleness > 0;
        const decoupled = asynchronous ? { behaviourWeightCap: spec.train.behaviourWeightCap } : undefined;
        // Asynchronous with the embedded policy here: the trainer's own thread (see the top).
        let trainerPolicy: PolicyHandle;
        if (asynchronous && handle) {
          const h = await startPolicyHandle(checkpoints, spec, version, { ...opts, decodes: false });
          stops.push(() => h.host.close());
          trainerPolicy = h;
        } else trainerPolicy = await embedded();
        started.trainer = trainerPolicy;
        const s = new TrainerService(nc, runId, trainerPolicy, checkpoints, decoupled, opts.trainSigner);
        stops.push(() => s.stop());
      }
    }
    if (roles.includes('rollout')) {
      const w = await startRolloutRole({ nc, js, store, checkpoints, runId, spec, opts, environment });
      started.rollout = w;
      stops.push(() => w.stop());
    }
  } catch (err) {
    await started.stop();
    throw err;
  }
  return started;
}

/** The rollout role: a worker taking the run's rollout commands. */
async function startRolloutRole(r: {
  nc: NatsConnection;
  js: JetStreamClient;
  store: EventStore;
  checkpoints: CheckpointStore;
  runId: string;
  spec: RunSpec;
  opts: RoleOptions;
  environment: () => Promise<TextEnvironment>;
}): Promise<RolloutWorker> {
  const { runId, opts } = r;
  // The run's events this worker appends get message ids keyed by its own credentials' seed
  // (unpredictable to every other role), or by the run's KV key without credentials.
  const { key } = await messageKeyOf(runId, opts.credentialSeed, () => r.checkpoints.dedupeKey());
  r.store.useDedupeKey(runId, key);
  return RolloutWorker.start(r.nc, r.js, r.store, {
    runId,
    env: await r.environment(),
    topK: r.spec.topK,
    tools: r.spec.tools,
    concurrency: opts.concurrency,
    inspect: opts.inspect,
    log: opts.log,
  });
}

/** The run's spec from its run.started config (what `akbe worker` and `akbe train --resume` use). */
export function runSpecOf(config: Record<string, unknown>): RunSpec {
  const train: Record<string, unknown> = {};
  for (const key of Object.keys(DEFAULT_TRAIN_CONFIG)) if (key in config) train[key] = config[key];
  // Optional keys (no default) the config validation needs back: offline-akbe's frozen checkpoint.
  if (typeof config.frozenPolicy === 'string') train.frozenPolicy = config.frozenPolicy;
  if (typeof config.configuredMaxResponseTokens === 'number')
    train.maxResponseTokens = config.configuredMaxResponseTokens;
  // A log from before akbeAggregation was recorded trained the pooled token-mean: resume it so.
  if (!('akbeAggregation' in config)) train.akbeAggregation = 'pooled';
  // One from before batchInvariantDecode (session 6) decoded on the plain decoder, not today's default.
  if (!('batchInvariantDecode' in config)) train.batchInvariantDecode = false;
  return {
    train: validateTrainConfig(train),
    worldDir: String(config.worldDir),
    basePolicy: String(config.basePolicy),
    topK: Number(config.topK ?? 3),
    tools: Array.isArray(config.tools) ? config.tools.map(String) : [...DEFAULT_TOOLS],
    index: typeof config.searchIndex === 'string' ? config.searchIndex : undefined,
    indexFingerprint: typeof config.indexFingerprint === 'string' ? config.indexFingerprint : undefined,
    eval: evalSettingsOf(config),
    keepCheckpoints: keepCheckpointsProblem(config.keepCheckpoints)
      ? undefined
      : (config.keepCheckpoints as number),
    plugins: pluginRefsOf(config.plugins),
  };
}

/** run.started's `evalQuestions` and `evalSplits`, when the run recorded them and they are sound. */
function evalSettingsOf(config: Record<string, unknown>): EvalSettings | undefined {
  const { evalQuestions: questions, evalSplits: splits } = config;
  if (typeof questions !== 'number' || !Number.isInteger(questions) || questions < 0) return undefined;
  if (!Array.isArray(splits) || !splits.every((x) => x === 'train' || x === 'dev' || x === 'test'))
    return undefined;
  return { questions, splits: [...splits] };
}

/** Reads a run's spec from its first event (waits up to `waitMs` for it to appear). */
export async function readRunSpec(store: EventStore, runId: string, waitMs = 0): Promise<RunSpec> {
  return (await readRunStart(store, runId, waitMs)).spec;
}

/**
 * A run's spec and the key that signs its train requests (run.started.trainSigner; undefined when
 * the run records none: an anonymous orchestrator, or a log from before signing), from one read of
 * its run.started, waited for up to `waitMs`.
 */
export async function readRunStart(
  store: EventStore,
  runId: string,
  waitMs = 0,
): Promise<{ spec: RunSpec; trainSigner?: string }> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    // One stream get, no consumer: a rollout worker's account may not create one.
    const started = await lastEventOf(store, runId, 'run.started');
    if (started) {
      const { event } = started;
      // The run's plugins first: the config may name an algorithm or tool only they register.
      await loadRecordedPlugins(event.data.config.plugins);
      const spec = runSpecOf(event.data.config as Record<string, unknown>);
      return event.data.trainSigner ? { spec, trainSigner: event.data.trainSigner } : { spec };
    }
    if (Date.now() >= deadline)
      throw new Error(
        `run ${runId}: no run.started event in the log; start it with akbe train --run-id ${runId}`,
      );
    await new Promise((r) => setTimeout(r, 500));
  }
}
