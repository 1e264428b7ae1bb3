/**
 * The policy service: `akbe.<run>.svc.generate`, request/reply in queue group `policy`.
 *
 * Every request names the policy version that must produce it (on-policy: rollouts of step k use
 * version k). The service holds one policy in a worker thread (src/gpu/policy-host.ts, whose
 * dynamic batcher decodes concurrent requests together) and moves to a newer version on demand,
 * from the run's checkpoint store; a request for an older version than the one loaded is refused
 * (StalePolicyVersionError): it would be off-policy. In the embedded process the trainer service
 * shares the same `PolicyHandle`, so a training step moves the policy without a reload.
 *
 *   request  { policyVersion, prompt: number[], maxNewTokens, seed, temperature, topP, stopTokens }
 *   reply    { tokens, logprobs (log pi at temperature 1, what PPO ratios use), finish, version }
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { serviceSubject } from '../events/subjects.js';
import type { PolicyHost } from '../gpu/policy-host.js';
import type { CheckpointStore } from './checkpoints.js';
import { answer, call, unpack } from './wire.js';

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

/** One policy in a worker thread and the version it holds; loads newer versions on demand. */
export class PolicyHandle {
  private loading: Promise<void> = Promise.resolve();

  constructor(
    readonly host: PolicyHost,
    public version: number,
    private readonly checkpoints: CheckpointStore,
    /** n_positions of the policy: prompt + new tokens must fit. */
    readonly context: number,
  ) {}

  /** Makes `version` the loaded one (loading it when newer); throws when it is older. */
  async ensure(version: number): Promise<void> {
    if (version === this.version) return;
    if (version < this.version) throw new StalePolicyVersionError(version, this.version);
    const next = this.loading.then(async () => {
      if (version <= this.version) return;
      await this.host.loadCheckpoint(await this.checkpoints.local(version));
      this.version = version;
    });
    this.loading = next.catch(() => undefined);
    await next;
    if (version < this.version) throw new StalePolicyVersionError(version, this.version);
  }
}

export interface GenerateCall {
  policyVersion: number;
  prompt: number[];
  maxNewTokens: number;
  seed: number;
  temperature: number;
  topP: number;
  stopTokens: number[];
}

export interface GenerateReply {
  tokens: number[];
  logprobs: number[];
  finish: 'stop_token' | 'stop_string' | 'length';
  version: number;
}

export class PolicyService implements AsyncDisposable {
  readonly stats = { requests: 0, errors: 0, tokens: 0 };
  private readonly sub: Subscription;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    nc: NatsConnection,
    runId: string,
    private readonly policy: PolicyHandle,
  ) {
    this.sub = nc.subscribe(serviceSubject(runId, 'generate'), {
      queue: POLICY_QUEUE,
      callback: (err, msg) => {
        if (err) return;
        const p = answer(msg, () => this.generate(msg.data));
        this.inFlight.add(p);
        void p.finally(() => this.inFlight.delete(p));
      },
    });
  }

  private async generate(data: Uint8Array): Promise<GenerateReply> {
    this.stats.requests++;
    const req = unpack<GenerateCall>(data);
    if (!req || !Array.isArray(req.prompt) || !Number.isInteger(req.policyVersion)) {
      this.stats.errors++;
      throw new TypeError('generate request needs { policyVersion, prompt: number[], maxNewTokens, seed }');
    }
    await this.policy.ensure(req.policyVersion);
    const room = this.policy.context - req.prompt.length;
    const maxNewTokens = Math.min(req.maxNewTokens, room);
    if (maxNewTokens < 1) return { tokens: [], logprobs: [], finish: 'length', version: this.policy.version };
    const r = await this.policy.host.generate({
      prompt: req.prompt,
      maxNewTokens,
      seed: req.seed,
      temperature: req.temperature,
      topP: req.topP,
      stopTokens: req.stopTokens,
    });
    this.stats.tokens += r.tokens.length;
    return {
      tokens: r.tokens,
      logprobs: r.policyLogprobs,
      finish: r.finishReason,
      version: this.policy.version,
    };
  }

  async stop(): Promise<void> {
    await this.sub.drain().catch(() => undefined);
    await Promise.all(this.inFlight);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}

/** Calls the policy service. */
export function requestGenerate(
  nc: NatsConnection,
  runId: string,
  req: GenerateCall,
  timeoutMs = 120_000,
): Promise<GenerateReply> {
  return call<GenerateReply>(nc, serviceSubject(runId, 'generate'), req, timeoutMs);
}
