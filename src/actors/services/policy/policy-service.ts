/**
 * The policy service: `akbe.<run>.svc.generate`, request/reply in queue group `policy`.
 *
 * Every request names the policy version that must produce it (synchronous: rollouts of step k use
 * version k). The service holds one policy in a worker thread (src/gpu/policy-host.ts, whose
 * continuous batcher decodes concurrent requests together) and moves to a newer version on demand,
 * from the run's checkpoint store. It serves up to `versionsInFlight` versions at once (maxStaleness
 * + 1: an asynchronous run's steps roll out on versions k - η .. k): the request carries its version
 * into the batcher, which admits it only into a batch of that version, so no trajectory mixes two
 * and a new version decodes beside the older ones. A request for a version older than that window
 * is refused (StalePolicyVersionError). In the embedded process the trainer service shares the same
 * `PolicyHandle`, so a training step moves the policy without a reload (the version it trains from
 * stays held for the requests that name it).
 *
 *   request  { policyVersion, prompt: number[], maxNewTokens, seed, temperature, topP, stopTokens, stopStrings? }
 *   reply    { tokens, logprobs (log pi at temperature 1, what PPO ratios use), finish, version }
 *
 * What answers is a ServedPolicy: the embedded one (PolicyHandle) or an external inference engine
 * behind an OpenAI-compatible server (external-policy.ts).
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { EdgeGate } from '../../../events/edge-gate.js';
import { serviceSubject } from '../../../events/subjects.js';
import type { PolicyHost } from '../../../gpu/policy-host.js';
import type { CheckpointStore } from '../../checkpoints/checkpoints.js';
import { type ResendOptions, SERVICE_START_WAIT_MS } from '../../nats/resend-request.js';
import { answer, call, respondError, ServiceCallError } from '../../nats/wire.js';
import { parseGenerateCall } from '../service-requests.js';
import { checkGenerateReply, type GenerateCall, type GenerateReply } from './protocol.js';

export const POLICY_QUEUE = 'policy';

export class StalePolicyVersionError extends Error {
  constructor(
    readonly requested: number,
    readonly loaded: number,
  ) {
    super(
      `policy version ${requested} was requested but this service already serves version ${loaded} (off-policy)`,
    );
    this.name = 'StalePolicyVersionError';
  }
}

/** What svc.generate serves from: a policy at a version, moving only forward. */
export interface ServedPolicy {
  readonly version: number;
  /** Positions of the policy: prompt + new tokens must fit. */
  readonly context: number;
  /** Token ids must be below it (requests are checked at the edge); unknown for some engines. */
  readonly vocabSize?: number;
  /** Makes `version` servable (loading it when newer); throws when it is older than the window. */
  ensure(version: number): Promise<void>;
  /** Decodes on `req.policyVersion` (reply.version: the version that decoded, when it can say). */
  generate(req: GenerateCall): Promise<Omit<GenerateReply, 'version'> & { version?: number }>;
}

/**
 * The version bookkeeping both served policies share: newer versions are loaded one at a time (a
 * burst of requests for v+1 loads it once), older ones are refused (off-policy) unless the policy
 * serves several versions (`serveOlder`).
 */
export abstract class ForwardOnlyPolicy {
  private loading: Promise<void> = Promise.resolve();

  constructor(public version: number) {}

  /** Loads `version` into the policy (called only for versions newer than the served one). */
  protected abstract load(version: number): Promise<void>;

  /** Makes an older `version` servable, or returns false when it cannot (the default: off-policy). */
  protected async serveOlder(_version: number): Promise<boolean> {
    return false;
  }

  /** Makes `version` servable (loading it when newer); throws when it is older and not served. */
  async ensure(version: number): Promise<void> {
    if (version === this.version) return;
    if (version < this.version) {
      if (await this.serveOlder(version)) return;
      throw new StalePolicyVersionError(version, this.version);
    }
    const next = this.loading.then(async () => {
      if (version <= this.version) return;
      await this.load(version);
      this.version = version;
    });
    this.loading = next.catch(() => undefined);
    await next;
    if (version < this.version) throw new StalePolicyVersionError(version, this.version);
  }
}

/**
 * One policy in a worker thread and the versions it decodes: the newest (loaded on demand) and up
 * to `versionsInFlight - 1` older ones (held when the policy moved on, or loaded for decoding only).
 * Start it with `hold()` so that its first version is held too (startPolicyHandle does).
 */
export class PolicyHandle extends ForwardOnlyPolicy implements ServedPolicy {
  /** The versions the worker holds, as far as this handle knows (it asked for every one). */
  private readonly held = new Set<number>();
  private loadingOlder = new Map<number, Promise<void>>();

  constructor(
    readonly host: PolicyHost,
    version: number,
    private readonly checkpoints: CheckpointStore,
    /** n_positions of the policy: prompt + new tokens must fit. */
    readonly context: number,
    /** Token ids must be below it (requests are checked at the edge). */
    readonly vocabSize?: number,
    /** Versions decoded at once: maxStaleness + 1 (1: synchronous, older versions refused). */
    readonly versionsInFlight = 1,
    /** False for a trainer's own policy (it never decodes, so it holds no versions). */
    readonly decodes = true,
  ) {
    super(version);
  }

  protected async load(version: number): Promise<void> {
    await this.host.loadCheckpoint(await this.checkpoints.local(version));
    await this.hold(version);
  }

  /** Holds the current parameters as `version` (requests naming it decode on them). */
  async hold(version = this.version): Promise<void> {
    if (!this.decodes) return;
    await this.host.holdVersion(version, this.versionsInFlight);
    this.held.add(version);
    for (const v of this.held) if (v <= version - this.versionsInFlight) this.held.delete(v);
  }

  /** The trainer made `version` (the current parameters): it is the newest served version now. */
  async adopt(version: number): Promise<void> {
    this.version = version;
    await this.hold(version);
  }

  protected override async serveOlder(version: number): Promise<boolean> {
    if (version <= this.version - this.versionsInFlight) return false;
    if (this.held.has(version)) return true;
    // A worker that joined late: the older version from the store, for decoding only.
    let loading = this.loadingOlder.get(version);
    if (!loading) {
      loading = this.checkpoints
        .local(version)
        .then((dir) => this.host.loadVersion(version, dir, this.versionsInFlight))
        .then(() => {
          this.held.add(version);
        })
        .finally(() => this.loadingOlder.delete(version));
      this.loadingOlder.set(version, loading);
    }
    await loading;
    return true;
  }

  async generate(req: GenerateCall): Promise<Omit<GenerateReply, 'version'> & { version: number }> {
    const { policyVersion, ...rest } = req;
    const r = await this.host.generate({ ...rest, version: policyVersion });
    return { tokens: r.tokens, logprobs: r.policyLogprobs, finish: r.finishReason, version: policyVersion };
  }
}

export class PolicyService implements AsyncDisposable {
  readonly stats = { requests: 0, errors: 0, tokens: 0 };
  private readonly sub: Subscription;
  private readonly inFlight = new Set<Promise<void>>();
  /** Refuses malformed requests (answered, or dead-lettered when they have no reply subject). */
  readonly edge: EdgeGate;

  constructor(
    nc: NatsConnection,
    runId: string,
    private readonly policy: ServedPolicy,
  ) {
    this.edge = new EdgeGate(nc, { detectedBy: 'svc.generate', respondError });
    this.sub = nc.subscribe(serviceSubject(runId, 'generate'), {
      queue: POLICY_QUEUE,
      callback: (err, msg) => {
        if (err) return;
        this.stats.requests++;
        const req = this.edge.admit(msg, (data) => parseGenerateCall(data, policy));
        if (!req) {
          this.stats.errors++;
          return;
        }
        const p = answer(msg, () => this.generate(req));
        this.inFlight.add(p);
        void p.finally(() => this.inFlight.delete(p));
      },
    });
  }

  private async generate(req: GenerateCall): Promise<GenerateReply> {
    await this.policy.ensure(req.policyVersion);
    const room = this.policy.context - req.prompt.length;
    const maxNewTokens = Math.min(req.maxNewTokens, room);
    if (maxNewTokens < 1) return { tokens: [], logprobs: [], finish: 'length', version: req.policyVersion };
    const r = await this.policy.generate({
      policyVersion: req.policyVersion,
      prompt: req.prompt,
      maxNewTokens,
      seed: req.seed,
      temperature: req.temperature,
      topP: req.topP,
      stopTokens: req.stopTokens,
      stopStrings: req.stopStrings,
    });
    this.stats.tokens += r.tokens.length;
    return {
      tokens: r.tokens,
      logprobs: r.logprobs,
      finish: r.finish,
      version: r.version ?? this.policy.version,
    };
  }

  async stop(): Promise<void> {
    await this.sub.drain().catch(() => undefined);
    await Promise.all(this.inFlight);
    await this.edge.settled();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}

/**
 * Calls the policy service; a policy worker that is still starting (or restarting) is waited for
 * (SERVICE_START_WAIT_MS: a rollout's delivery attempt is not spent on "no responders"). The reply
 * is checked against the request (checkGenerateReply): one that breaks it is a ServiceCallError
 * named 'InvalidReply' whose message names the field.
 */
export async function requestGenerate(
  nc: NatsConnection,
  runId: string,
  req: GenerateCall,
  timeoutMs = 120_000,
  opts: ResendOptions = {},
): Promise<GenerateReply> {
  const subject = serviceSubject(runId, 'generate');
  const reply = await call<unknown>(nc, subject, req, timeoutMs, {
    waitForResponderMs: SERVICE_START_WAIT_MS,
    ...opts,
  });
  try {
    checkGenerateReply(reply, req);
  } catch (err) {
    throw new ServiceCallError(subject, 'InvalidReply', (err as Error).message, { cause: err });
  }
  return reply;
}
