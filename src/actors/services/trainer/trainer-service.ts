/**
 * The trainer service: `akbe.<run>.svc.train`, request/reply in queue group `trainer`. It does the
 * I/O of a learner step; the training itself is src/train/train-loop.ts.
 *
 * A request is one learner step: the assembled batch of step k (src/rl/batch.ts), rolled out by
 * version k. The service makes sure its policy is version k (loading it, AdamW state included,
 * from the checkpoint store when another process trained it), hands the policy's worker thread to
 * the training loop (the mini-batches, epochs and loss terms; session.run off this event loop),
 * saves version k+1 to disk and the object store, sets the run's current version in KV, and
 * replies with the new version, the averaged metrics and where the checkpoint is.
 *
 * DPO (dpo-akbe): the loop asks for the frozen reference, the run's base policy v0 (a second,
 * scoring-only policy worker this service starts on the first DPO step), and the reply carries
 * each pair row's reference logprob so learner.step records them (src/actors/orchestrator/run-steps.ts).
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { EdgeGate } from '../../../events/edge-gate.js';
import { serviceSubject } from '../../../events/subjects.js';
import { trainRequestDigest } from '../../../events/train-digest.js';
import { signTrainRequest, trainRequestRefusal } from '../../../events/train-signature.js';
import { PolicyHost } from '../../../gpu/policy-host.js';
import type { DeviceChoice } from '../../../gpu/session.js';
import { trainLoop } from '../../../train/train-loop.js';
import { holdPoint, killPoint } from '../../../util/kill-point.js';
import type { CheckpointStore } from '../../checkpoints/checkpoints.js';
import { SERVICE_START_WAIT_MS } from '../../nats/resend-request.js';
import { answer, call, respondError } from '../../nats/wire.js';
import type { PolicyHandle } from '../policy/policy-service.js';
import { parseTrainCall } from '../service-requests.js';
import type { TrainCall, TrainReply } from './protocol.js';

export const TRAINER_QUEUE = 'trainer';

/** A train request the trainer will not train on (unsigned, another signer, replayed, edited). */
export class TrainRequestRefused extends Error {
  override name = 'TrainRequestRefused';
}

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
  /** The last step this service trained and published, to answer a retry of it without training. */
  private last?: { step: number; reply: TrainReply };
  /** Refuses malformed requests (answered, or dead-lettered when they have no reply subject). */
  readonly edge: EdgeGate;

  constructor(
    private readonly nc: NatsConnection,
    private readonly runId: string,
    private readonly policy: PolicyHandle,
    private readonly checkpoints: CheckpointStore,
    /** Set when the policy's trainer is decoupled (startPolicyHandle with maxStaleness >= 1). */
    private readonly decoupled?: DecoupledTraining,
    /** The orchestrator's public nkey: when set, only requests it signed are trained on. */
    private readonly trustedSigner?: string,
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
    // Before anything is loaded or trained: a refusal is an error reply naming why.
    const refusal =
      this.trustedSigner && trainRequestRefusal(this.trustedSigner, this.runId, req, req.signature);
    if (refusal) throw new TrainRequestRefused(refusal);
    const requestSha256 = trainRequestDigest(this.runId, req);
    const version = req.policyVersion + 1;
    // A retried request whose step this service already trained (a resumed orchestrator sends
    // it again): the same reply, not a second update on top of the first.
    if (
      this.last?.step === req.step &&
      this.last.reply.version === version &&
      this.policy.version === version
    )
      return this.last.reply;
    await this.policy.ensure(req.policyVersion);
    const { metrics, refLogp } = await trainLoop(this.policy.host, req, {
      reference: () => this.referencePolicy(),
      ...(this.decoupled ? { decoupled: this.decoupled } : {}),
      onUpdate: async (done, total) => {
        killPoint('train', req.step);
        await holdPoint('train', req.step);
        // Progress for whoever draws a bar (core NATS, not the log: it is not a fact of the run).
        this.nc.publish(trainProgressSubject(this.runId), JSON.stringify({ step: req.step, done, total }));
      },
    });
    await this.policy.host.saveCheckpoint(this.checkpoints.versionDir(version));
    killPoint('publish', req.step);
    await this.policy.adopt(version);
    const published = await this.checkpoints.publish(version);
    const reply = {
      version,
      metrics,
      published,
      requestSha256,
      ...(refLogp ? { refLogp: Array.from(refLogp) } : {}),
    };
    this.last = { step: req.step, reply };
    return reply;
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
    /** The orchestrator's nkey seed: the request goes signed (train-signature.ts). */
    seed?: Uint8Array;
  } = {},
): Promise<TrainReply> {
  const { timeoutMs = 30 * 60_000, waitForResponderMs = TRAINER_START_WAIT_MS, signal, seed } = opts;
  const body = seed ? { ...req, signature: signTrainRequest(seed, runId, req) } : req;
  return call<TrainReply>(nc, serviceSubject(runId, 'train'), body, timeoutMs, {
    waitForResponderMs,
    signal,
  });
}
