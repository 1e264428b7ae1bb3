/**
 * The roles a process can play for a run, each a NATS participant that can run anywhere:
 *
 *   search   svc.search (queue `search`): the world's lexical retrieval behind src/index's service
 *   policy   svc.generate (queue `policy`): a policy in a worker thread, version on demand
 *   trainer  svc.train (queue `trainer`): the training step in the policy's worker thread
 *   rollout  the run's rollout work queue (dispatch.ts): rollout machines calling the above
 *
 * `akbe worker --role R` starts one (or `all`); `akbe train` starts all of them in its own process
 * unless told not to, so one process stays the embedded default. In one process the policy and
 * the trainer share one PolicyHandle: a training step moves the serving policy in place.
 *
 * Everything a role needs to know about a run is in the run's `run.started` event (RunSpec).
 */
import { join } from 'node:path';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { InspectionEvent } from 'xstate';
import type { EventStore } from '../events/store.js';
import type { DeviceChoice } from '../gpu/session.js';
import { splitTitle } from '../index/corpus.js';
import type { SearchBackend, SearchHit } from '../index/searcher.js';
import type { SearchService } from '../index/service.js';
import { DEFAULT_TRAIN_CONFIG, type TrainConfig, validateTrainConfig } from '../rl/config.js';
import type { CheckpointStore } from './checkpoints.js';
import { PolicyHandle, PolicyService } from './policy-service.js';
import { RolloutWorker } from './rollout-worker.js';
import { TrainerService } from './trainer-service.js';

export const ROLES = ['rollout', 'policy', 'search', 'trainer'] as const;
export type Role = (typeof ROLES)[number];

/** What every role reads from `run.started.config`. */
export interface RunSpec {
  train: TrainConfig;
  worldDir: string;
  basePolicy: string;
  /** Passages per search. */
  topK: number;
}

/** Exact lexical top-k over a world's corpus, as the pretraining demonstrations saw it (src/world/retrieval.ts). */
export async function worldSearchBackend(worldDir: string): Promise<SearchBackend> {
  const { loadCorpus } = await import('../index/corpus.js');
  const { LEXICAL_DEFAULTS, LexicalEmbedder } = await import('../index/lexical.js');
  const { bruteForceTopK, stackRows } = await import('../index/hnsw.js');
  const corpus = await loadCorpus(join(worldDir, 'corpus.jsonl'));
  const embedder = LexicalEmbedder.fit(
    corpus.map((p) => p.contents),
    LEXICAL_DEFAULTS,
  );
  const matrix = stackRows(
    corpus.map((p) => embedder.embed(p.contents)),
    embedder.dim,
  );
  return {
    async search(queries: string[], k: number): Promise<SearchHit[][]> {
      return queries.map((q) => {
        const top = bruteForceTopK(matrix, embedder.dim, embedder.embed(q), k);
        return top.labels.map((label, i) => {
          const p = corpus[label];
          return {
            id: p.id,
            title: splitTitle(p.contents).title,
            contents: p.contents,
            score: top.scores[i],
          };
        });
      });
    },
  };
}

export async function startSearchRole(
  nc: NatsConnection,
  runId: string,
  spec: RunSpec,
): Promise<SearchService> {
  const { SearchService } = await import('../index/service.js');
  return SearchService.start(nc, await worldSearchBackend(spec.worldDir), { runId });
}

export interface PolicyRoleOptions {
  device?: DeviceChoice;
  threads?: number;
}

/** A policy in a worker thread at `version` (from the checkpoint store). */
export async function startPolicyHandle(
  checkpoints: CheckpointStore,
  spec: RunSpec,
  version: number,
  opts: PolicyRoleOptions = {},
): Promise<PolicyHandle> {
  const { PolicyHost } = await import('../gpu/policy-host.js');
  const { readFile } = await import('node:fs/promises');
  const dir = await checkpoints.local(version);
  const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as { n_positions: number };
  const host = await PolicyHost.start({
    checkpoint: dir,
    device: opts.device ?? 'cpu',
    intraOpThreads: opts.threads,
    trainer: { akbeLoss: spec.train.akbeLossForm },
  });
  return new PolicyHandle(host, version, checkpoints, config.n_positions);
}

export interface StartedRoles extends AsyncDisposable {
  policy?: PolicyHandle;
  rollout?: RolloutWorker;
  stop(): Promise<void>;
}

export interface RoleOptions extends PolicyRoleOptions {
  concurrency?: number;
  /** Policy version the policy/trainer roles start at (default: the run's current version). */
  version?: number;
  inspect?: (event: InspectionEvent) => void;
  log?: (line: string) => void;
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
  try {
    if (roles.includes('search')) {
      const s = await startSearchRole(nc, runId, spec);
      stops.push(() => s.stop());
    }
    if (roles.includes('policy') || roles.includes('trainer')) {
      const version = opts.version ?? (await checkpoints.currentVersion()) ?? 0;
      const handle = await startPolicyHandle(checkpoints, spec, version, opts);
      started.policy = handle;
      stops.push(() => handle.host.close());
      if (roles.includes('policy')) {
        const s = new PolicyService(nc, runId, handle);
        stops.push(() => s.stop());
      }
      if (roles.includes('trainer')) {
        const s = new TrainerService(nc, runId, handle, checkpoints);
        stops.push(() => s.stop());
      }
    }
    if (roles.includes('rollout')) {
      const { readWorldTokenizer } = await import('../world/files.js');
      const w = await RolloutWorker.start(nc, js, store, {
        runId,
        tokenizer: await readWorldTokenizer(spec.worldDir),
        topK: spec.topK,
        concurrency: opts.concurrency,
        inspect: opts.inspect,
        log: opts.log,
      });
      started.rollout = w;
      stops.push(() => w.stop());
    }
  } catch (err) {
    await started.stop();
    throw err;
  }
  return started;
}

/** The run's spec from its run.started config (what `akbe worker` and `akbe train --resume` use). */
export function runSpecOf(config: Record<string, unknown>): RunSpec {
  const train: Record<string, unknown> = {};
  for (const key of Object.keys(DEFAULT_TRAIN_CONFIG)) if (key in config) train[key] = config[key];
  if (typeof config.configuredMaxResponseTokens === 'number')
    train.maxResponseTokens = config.configuredMaxResponseTokens;
  return {
    train: validateTrainConfig(train),
    worldDir: String(config.worldDir),
    basePolicy: String(config.basePolicy),
    topK: Number(config.topK ?? 3),
  };
}

/** Reads a run's spec from its first event (waits up to `waitMs` for it to appear). */
export async function readRunSpec(store: EventStore, runId: string, waitMs = 0): Promise<RunSpec> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    for await (const { event } of store.replay(runId)) {
      if (event.type === 'run.started') return runSpecOf(event.data.config as Record<string, unknown>);
      break;
    }
    if (Date.now() >= deadline)
      throw new Error(
        `run ${runId}: no run.started event in the log; start it with akbe train --run-id ${runId}`,
      );
    await new Promise((r) => setTimeout(r, 500));
  }
}
