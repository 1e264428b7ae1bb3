/**
 * The trainer service: `akbe.<run>.svc.train`, request/reply in queue group `trainer`.
 *
 * A request is one learner step: the assembled batch of step k (src/rl/batch.ts), rolled out by
 * version k. The service makes sure its policy is version k (loading it, AdamW state included,
 * from the checkpoint store when another process trained it), runs one optimizer update per
 * mini-batch and epoch in the policy's worker thread (src/gpu: the training graph, session.run off
 * this event loop), saves version k+1 to disk and the object store, sets the run's current
 * version in KV, and replies with the new version, the averaged metrics and where the checkpoint is.
 *
 * Every update uses the same graph shape: mini-batches are padded to `rowsPerUpdate` rows (zero
 * rows carry no loss weight) and the batch to a fixed T, so one ORT session serves the run.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { serviceSubject } from '../events/subjects.js';
import type { TrainMetrics } from '../gpu/trainer.js';
import { sliceMiniBatch, type TrainBatch } from '../rl/batch.js';
import type { LossTerm } from '../rl/losses.js';
import type { CheckpointStore, PublishedCheckpoint } from './checkpoints.js';
import type { PolicyHandle } from './policy-service.js';
import { answer, call, unpack } from './wire.js';

export const TRAINER_QUEUE = 'trainer';

export interface TrainCall {
  step: number;
  policyVersion: number;
  batch: TrainBatch;
  losses: LossTerm[];
  lr: number;
  epochs: number;
  /** Rows of every update's graph (>= the largest mini-batch). */
  rowsPerUpdate: number;
  padId: number;
}

export interface TrainReply {
  version: number;
  metrics: Record<string, number>;
  published: PublishedCheckpoint;
}

export class TrainRequestError extends Error {
  constructor(message: string) {
    super(`train request: ${message}`);
    this.name = 'TrainRequestError';
  }
}

const MEAN_KEYS = ['loss', 'pgLoss', 'akbeLoss', 'gradNorm', 'clipFrac', 'approxKl', 'entropy'] as const;

/** Where the trainer reports each optimizer update of a step: `{ step, done, total }` JSON. */
export function trainProgressSubject(runId: string): string {
  return `${serviceSubject(runId, 'train')}.progress`;
}

export class TrainerService implements AsyncDisposable {
  private readonly sub: Subscription;
  private queue: Promise<unknown> = Promise.resolve();
  private inFlight: Promise<void> | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly runId: string,
    private readonly policy: PolicyHandle,
    private readonly checkpoints: CheckpointStore,
  ) {
    this.sub = nc.subscribe(serviceSubject(runId, 'train'), {
      queue: TRAINER_QUEUE,
      callback: (err, msg) => {
        if (err) return;
        const p = answer(msg, () => {
          // One step at a time: steps are sequential by construction, this only guards retries.
          const run = this.queue.then(() => this.train(unpack<TrainCall>(msg.data)));
          this.queue = run.catch(() => undefined);
          return run;
        });
        this.inFlight = p;
      },
    });
  }

  private async train(req: TrainCall): Promise<TrainReply> {
    const b = req.batch;
    if (!b || !(b.inputIds instanceof Int32Array) || !Number.isInteger(req.policyVersion))
      throw new TrainRequestError('needs { step, policyVersion, batch (typed arrays), losses, lr }');
    const version = req.policyVersion + 1;
    // A retried request whose step already trained: answer with the published version.
    if (this.policy.version === version && (await this.checkpoints.currentVersion()) === version)
      return { version, metrics: {}, published: await this.checkpoints.publish(version) };
    await this.policy.ensure(req.policyVersion);
    const grpo = req.losses.find((l) => l.name === 'grpo');
    const akbe = req.losses.find((l) => l.name.startsWith('akbe'));
    const clipEps = grpo?.options.clipEps ?? 0.2;
    const hyper = {
      lr: req.lr,
      clipEpsLow: clipEps,
      clipEpsHigh: clipEps,
      lambda: akbe?.options.lambda ?? 0,
    };
    const akbeOn = akbe !== undefined;
    if (akbe?.name === 'akbe-clipped') await this.recomputeOld(b);
    const t0 = performance.now();
    const sums: Record<string, number> = {};
    let updates = 0;
    for (let epoch = 0; epoch < req.epochs; epoch++) {
      for (let i = 0; i < b.miniBatches.length; i++) {
        const mb = sliceMiniBatch(b, i, { padRowsTo: req.rowsPerUpdate, padId: req.padId });
        if (!akbeOn) mb.akbeWeight.fill(0);
        const batch = {
          inputIds: BigInt64Array.from(mb.inputIds, (x) => BigInt(x)),
          lossMask: mb.lossMask,
          oldLogprobs: mb.oldLogprobs,
          advantages: mb.advantages,
          pgWeight: mb.pgWeight,
          akbeWeight: mb.akbeWeight,
        };
        const m: TrainMetrics = await this.policy.host.trainStep({ batch, hyper }, { transfer: true });
        for (const k of MEAN_KEYS) sums[k] = (sums[k] ?? 0) + m[k];
        updates++;
        // Progress for whoever draws a bar (core NATS, not the log: it is not a fact of the run).
        this.nc.publish(
          trainProgressSubject(this.runId),
          JSON.stringify({ step: req.step, done: updates, total: req.epochs * b.miniBatches.length }),
        );
      }
    }
    const trainSeconds = (performance.now() - t0) / 1000;
    const dir = this.checkpoints.versionDir(version);
    await this.policy.host.saveCheckpoint(dir);
    this.policy.version = version;
    const published = await this.checkpoints.publish(version);
    const metrics: Record<string, number> = { updates, trainSeconds };
    for (const k of MEAN_KEYS) metrics[k] = updates ? sums[k] / updates : 0;
    metrics.tokensPerSecond = trainSeconds > 0 ? (b.rows * b.T * req.epochs) / trainSeconds : 0;
    return { version, metrics, published };
  }

  /** log pi_old of re-conditioned rows (no-tool targets under the with-tool prompt), before any update. */
  private async recomputeOld(b: TrainBatch): Promise<void> {
    const rows = [...b.recomputeOld.keys()].filter((r) => b.recomputeOld[r] === 1);
    if (rows.length === 0) return;
    const seqs = rows.map((r) => Array.from(b.inputIds.subarray(r * b.T, r * b.T + b.rowInfo[r].length)));
    const lps = await this.policy.host.logprobs(seqs);
    rows.forEach((r, i) => {
      const base = r * (b.T - 1);
      lps[i].forEach((lp, t) => {
        if (b.lossMask[base + t] === 1) b.oldLogprobs[base + t] = lp;
      });
    });
  }

  async stop(): Promise<void> {
    await this.sub.drain().catch(() => undefined);
    await this.inFlight?.catch(() => undefined);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}

/** Calls the trainer service (a step takes a while: the default timeout is generous). */
export function requestTrain(
  nc: NatsConnection,
  runId: string,
  req: TrainCall,
  timeoutMs = 30 * 60_000,
): Promise<TrainReply> {
  return call<TrainReply>(nc, serviceSubject(runId, 'train'), req, timeoutMs);
}
