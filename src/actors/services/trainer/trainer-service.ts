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
 * DPO (dpo-akbe): before the step's first update the service scores every pair row with the
 * frozen reference, the run's base policy v0 (a second, scoring-only policy worker, started on the
 * first DPO step), fills batch.refLogp with each row's sequence logprob, and returns them in the
 * reply so learner.step records them (src/actors/orchestrator/run-steps.ts).
 *
 * Every update uses the same graph shape: mini-batches are padded to `rowsPerUpdate` rows (zero
 * rows carry no loss weight) and the batch to a fixed T, so one ORT session serves the run.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { EdgeGate } from '../../../events/edge-gate.js';
import { serviceSubject } from '../../../events/subjects.js';
import { trainRequestDigest } from '../../../events/train-digest.js';
import { PolicyHost } from '../../../gpu/policy-host.js';
import type { DeviceChoice } from '../../../gpu/session.js';
import type { TrainMetrics } from '../../../gpu/trainer.js';
import { sliceMiniBatch, type TrainBatch } from '../../../rl/batch.js';
import { LossName } from '../../../rl/losses.js';
import { holdPoint, killPoint } from '../../../util/kill-point.js';
import type { CheckpointStore } from '../../checkpoints/checkpoints.js';
import { SERVICE_START_WAIT_MS } from '../../nats/resend-request.js';
import { answer, call, respondError } from '../../nats/wire.js';
import type { PolicyHandle } from '../policy/policy-service.js';
import { parseTrainCall } from '../service-requests.js';
import type { TrainCall, TrainReply } from './protocol.js';

export const TRAINER_QUEUE = 'trainer';

const MEAN_KEYS = [
  'loss',
  'pgLoss',
  'akbeLoss',
  'dpoLoss',
  'gradNorm',
  'clipFrac',
  'approxKl',
  'entropy',
] as const;

/** Where the trainer reports each optimizer update of a step: `{ step, done, total }` JSON. */
export function trainProgressSubject(runId: string): string {
  return `${serviceSubject(runId, 'train')}.progress`;
}

/** The decoupled objective for asynchronous runs (maxStaleness >= 1, docs/training.md). */
export interface DecoupledTraining {
  /** pi_prox / pi_behav above it weighs 0 (config.behaviourWeightCap). */
  behaviourWeightCap: number;
}

export class TrainerService implements AsyncDisposable {
  private readonly sub: Subscription;
  private queue: Promise<unknown> = Promise.resolve();
  private inFlight: Promise<void> | null = null;
  /** DPO's frozen reference (v0), scoring only; started on the first DPO step. */
  private reference?: Promise<PolicyHost>;
  /** Refuses malformed requests (answered, or dead-lettered when they have no reply subject). */
  readonly edge: EdgeGate;

  constructor(
    private readonly nc: NatsConnection,
    private readonly runId: string,
    private readonly policy: PolicyHandle,
    private readonly checkpoints: CheckpointStore,
    /** Set when the policy's trainer is decoupled (startPolicyHandle with maxStaleness >= 1). */
    private readonly decoupled?: DecoupledTraining,
  ) {
    this.edge = new EdgeGate(nc, { detectedBy: 'svc.train', respondError });
    this.sub = nc.subscribe(serviceSubject(runId, 'train'), {
      queue: TRAINER_QUEUE,
      callback: (err, msg) => {
        if (err) return;
        const req = this.edge.admit(msg, (data) => parseTrainCall(data, policy));
        if (!req) return;
        const p = answer(msg, () => {
          // One step at a time: steps are sequential by construction, this only guards retries.
          const run = this.queue.then(() => this.train(req));
          this.queue = run.catch(() => undefined);
          return run;
        });
        this.inFlight = p;
      },
    });
  }

  private async train(req: TrainCall): Promise<TrainReply> {
    const b = req.batch;
    const requestSha256 = trainRequestDigest(this.runId, req);
    const version = req.policyVersion + 1;
    // A retried request whose step already trained: answer with the published version.
    if (this.policy.version === version && (await this.checkpoints.currentVersion()) === version)
      return { version, metrics: {}, published: await this.checkpoints.publish(version) };
    await this.policy.ensure(req.policyVersion);
    const grpo = req.losses.find((l) => l.name === 'grpo');
    const akbe = req.losses.find((l) => l.name.startsWith('akbe'));
    const dpo = req.losses.find((l) => l.name === LossName.DPO);
    const clipEps = grpo?.options.clipEps ?? 0.2;
    const hyper = {
      lr: req.lr,
      clipEpsLow: clipEps,
      clipEpsHigh: clipEps,
      lambda: akbe?.options.lambda ?? dpo?.options.lambda ?? 0,
      ...(dpo ? { dpoBeta: dpo.options.beta } : {}),
      ...(this.decoupled ? { behaviourWeightCap: this.decoupled.behaviourWeightCap } : {}),
    };
    if (dpo)
      b.refLogp = await referenceSeqLogprobs(b, async (seqs) =>
        (await this.referencePolicy()).logprobs(seqs),
      );
    const akbeOn = akbe !== undefined;
    const logprobs = (seqs: number[][]) => this.policy.host.logprobs(seqs);
    if (akbe?.name === 'akbe-clipped') await recomputeOldLogprobs(b, logprobs);
    // pi_prox: version k (the policy now, before any update) over every row.
    if (this.decoupled) b.proxLogprobs = await proxLogprobsOf(b, logprobs);
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
          proxLogprobs: mb.proxLogprobs, // read only by a decoupled Trainer (maxStaleness >= 1)
          advantages: mb.advantages,
          pgWeight: mb.pgWeight,
          akbeWeight: mb.akbeWeight,
          dpoPairs: mb.dpoPairMatrix,
          dpoWeight: mb.dpoWeight,
          refLogp: mb.refLogp,
        };
        const m: TrainMetrics = await this.policy.host.trainStep({ batch, hyper }, { transfer: true });
        killPoint('train', req.step);
        await holdPoint('train', req.step);
        for (const k of MEAN_KEYS) if (m[k] !== undefined) sums[k] = (sums[k] ?? 0) + m[k];
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
    killPoint('publish', req.step);
    await this.policy.adopt(version);
    const published = await this.checkpoints.publish(version);
    const metrics: Record<string, number> = { updates, trainSeconds };
    for (const k of MEAN_KEYS) if (k !== 'dpoLoss' || k in sums) metrics[k] = updates ? sums[k] / updates : 0;
    metrics.tokensPerSecond = trainSeconds > 0 ? (b.rows * b.T * req.epochs) / trainSeconds : 0;
    return {
      version,
      metrics,
      published,
      requestSha256,
      ...(b.refLogp ? { refLogp: Array.from(b.refLogp) } : {}),
    };
  }

  /** The frozen reference of DPO: version 0 (never pruned), on the policy's device. */
  private referencePolicy(): Promise<PolicyHost> {
    this.reference ??= this.checkpoints
      .local(0)
      .then((dir) => PolicyHost.start({ checkpoint: dir, device: this.policy.host.device as DeviceChoice }));
    return this.reference;
  }

  async stop(): Promise<void> {
    await this.sub.drain().catch(() => undefined);
    await this.inFlight?.catch(() => undefined);
    await this.edge.settled();
    await (await this.reference?.catch(() => undefined))?.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}

/**
 * Fills log pi_old of the re-conditioned rows (`recomputeOld` 1: no-tool targets under the
 * with-tool prompt, src/rl/batch.ts) in place, with `logprobs` of the step's policy version k,
 * before any update. Row r's sequence is its `length` unpadded tokens; logprob t of it (token t+1)
 * lands at [r, t] of the [B, T-1] arrays, on loss-mask positions only (the rest stay 0).
 */
export async function recomputeOldLogprobs(
  b: TrainBatch,
  logprobs: (sequences: number[][]) => Promise<number[][]>,
): Promise<void> {
  const rows = [...b.recomputeOld.keys()].filter((r) => b.recomputeOld[r] === 1);
  await fillRowLogprobs(b, rows, logprobs, b.oldLogprobs);
}

/**
 * log pi_prox of every row (the decoupled objective's proximal policy: version k, the policy before
 * the step's first update), [B, T-1] laid out as oldLogprobs, on loss-mask positions (0 elsewhere).
 */
export async function proxLogprobsOf(
  b: TrainBatch,
  logprobs: (sequences: number[][]) => Promise<number[][]>,
): Promise<Float32Array> {
  const prox = new Float32Array(b.oldLogprobs.length);
  await fillRowLogprobs(
    b,
    b.rowInfo.map((_, r) => r),
    logprobs,
    prox,
  );
  return prox;
}

/** Writes `logprobs` of rows `rows` (their unpadded sequences) into `into` on loss-mask positions. */
async function fillRowLogprobs(
  b: TrainBatch,
  rows: number[],
  logprobs: (sequences: number[][]) => Promise<number[][]>,
  into: Float32Array,
): Promise<void> {
  if (rows.length === 0) return;
  const seqs = rows.map((r) => Array.from(b.inputIds.subarray(r * b.T, r * b.T + b.rowInfo[r].length)));
  const lps = await logprobs(seqs);
  rows.forEach((r, i) => {
    const base = r * (b.T - 1);
    lps[i].forEach((lp, t) => {
      if (b.lossMask[base + t] === 1) into[base + t] = lp;
    });
  });
}

/**
 * Each DPO pair row's sequence logprob under the reference (`logprobs` of v0): the sum over the
 * row's loss-mask positions (its generated tokens, in its context), 0 for rows in no pair.
 */
export async function referenceSeqLogprobs(
  b: TrainBatch,
  logprobs: (sequences: number[][]) => Promise<number[][]>,
): Promise<Float32Array> {
  const out = new Float32Array(b.rows);
  const rows = [...new Set((b.dpoPairs ?? []).flatMap((p) => [p.chosen, p.rejected]))].sort((x, y) => x - y);
  if (rows.length === 0) return out;
  const seqs = rows.map((r) => Array.from(b.inputIds.subarray(r * b.T, r * b.T + b.rowInfo[r].length)));
  const lps = await logprobs(seqs);
  rows.forEach((r, i) => {
    const base = r * (b.T - 1);
    out[r] = lps[i].reduce((a, lp, t) => a + (b.lossMask[base + t] === 1 ? lp : 0), 0);
  });
  return out;
}

/**
 * How long a train request waits for a trainer to subscribe: a trainer of its own process
 * (`akbe worker --role trainer`) may start after the run, or restart after a crash; one step's
 * request cannot be retried by redelivery as a rollout's can, so it waits instead of failing.
 */
export const TRAINER_START_WAIT_MS = SERVICE_START_WAIT_MS;

/** Calls the trainer service (a step takes a while: the default timeout is generous). */
export function requestTrain(
  nc: NatsConnection,
  runId: string,
  req: TrainCall,
  opts: {
    timeoutMs?: number;
    /** How long "no responders" is asked again (a trainer still starting). */
    waitForResponderMs?: number;
    /** Ends the wait (and its re-sends) at once, e.g. when the run machine stops. */
    signal?: AbortSignal;
  } = {},
): Promise<TrainReply> {
  const { timeoutMs = 30 * 60_000, waitForResponderMs = TRAINER_START_WAIT_MS, signal } = opts;
  return call<TrainReply>(nc, serviceSubject(runId, 'train'), req, timeoutMs, { waitForResponderMs, signal });
}
