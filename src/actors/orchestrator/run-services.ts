/**
 * What a run's steps need running around them (orchestrator.ts): the roles this process serves
 * (roles.ts), the watcher of rollout.completed, the rollout deadlines and the trainer's progress
 * messages. The orchestrator's edge is here too: completions and progress messages that fail
 * validation are dead-lettered (src/events/edge-gate.ts), never trusted and never fatal.
 */
import { EdgeGate } from '../../events/edge-gate.js';
import { signerOf } from '../../events/train-signature.js';
import type { TextEnvironment } from '../../text/environment.js';
import type { CheckpointStore } from '../checkpoints/checkpoints.js';
import { type Role, type StartedRoles, startRoles } from '../roles/roles.js';
import { parseTrainProgress } from '../services/trainer/train-progress.js';
import { trainProgressSubject } from '../services/trainer/trainer-service.js';
import { CompletionWatcher, type DispatchedRollout } from './dispatch.js';
import { enforceRolloutDeadlines } from './rollout-deadlines.js';
import type { RunSetup } from './run-setup.js';
import type { TrainingOptions } from './training-options.js';

const ALL_ROLES: readonly Role[] = ['search', 'policy', 'trainer', 'rollout'];

export class RunServices {
  readonly edge: EdgeGate;
  readonly watcher: CompletionWatcher;
  /** The command stream sequence of each dispatched rollout (the max-deliveries advisory names it). */
  readonly seqToRollout = new Map<number, DispatchedRollout>();
  private roles: StartedRoles | null = null;
  private stopProgress = () => {};
  private stopDeadlines = () => {};

  constructor(
    private readonly o: TrainingOptions,
    private readonly log: (line: string) => void,
  ) {
    this.edge = new EdgeGate(o.nc, { detectedBy: `orchestrator:${o.runId}`, log });
    this.watcher = new CompletionWatcher(o.js, o.runId, this.edge);
  }

  async start(checkpoints: CheckpointStore, setup: RunSetup, environment: TextEnvironment): Promise<void> {
    const { o, log } = this;
    const { nc, store, runId } = o;
    this.roles = await startRoles(nc, o.js, store, checkpoints, runId, setup.spec, o.roles ?? ALL_ROLES, {
      version: setup.machineInput.initialVersion,
      concurrency: o.concurrency,
      device: o.device,
      threads: o.threads,
      inspect: o.inspect,
      engine: o.engine,
      searchLatencyMs: o.searchLatencyMs,
      environment,
      log,
      // This process's trainer trains only on what this orchestrator signed.
      ...(o.signingSeed ? { trainSigner: signerOf(o.signingSeed), credentialSeed: o.signingSeed } : {}),
    });
    await this.watcher.start((err) => log(`completion watcher: ${err.message}`));
    this.stopDeadlines = enforceRolloutDeadlines({
      nc,
      jsm: store.jsm,
      runId,
      watcher: this.watcher,
      rolloutOfSeq: (seq) => this.seqToRollout.get(seq),
      edge: this.edge,
      stallMs: o.stallTimeoutMs ?? 10 * 60_000,
    });
    this.stopProgress = followTrainProgress(o, this.edge);
  }

  /** Stops whatever `start` got to, in reverse; never throws. */
  async stop(): Promise<void> {
    this.stopDeadlines();
    this.stopProgress();
    await this.watcher.stop().catch(() => undefined);
    await this.roles?.stop();
    await this.edge.settled();
  }
}

/** The trainer's per-update progress messages, validated at the edge, to `onTrainProgress`. */
function followTrainProgress(o: TrainingOptions, edge: EdgeGate): () => void {
  const sub = o.nc.subscribe(trainProgressSubject(o.runId), {
    callback: (err, msg) => {
      if (err) return;
      const p = edge.admit(msg, parseTrainProgress, false);
      if (p) o.onTrainProgress?.(p.step, p.done, p.total);
    },
  });
  return () => sub.unsubscribe();
}
