/**
 * svc.generate backed by an external inference engine (vLLM, SGLang, or another `akbe policy serve
 * --http`) through its OpenAI-compatible completions API, token-in/token-out (completions-client.ts).
 * akbe keeps orchestrating: rollouts, the event log, labels and training stay here; only decoding
 * moves to the engine.
 *
 * On-policy needs the engine to hold the version a rollout names. Weight sync is a published
 * checkpoint loaded from disk (`sync: 'disk'`: SGLang's POST /update_weights_from_disk, which akbe's
 * server also has): when a request names a newer version, the checkpoint the trainer published for
 * it is handed to the engine by path, so engine and trainer must share a filesystem. With
 * `sync: 'none'` the engine serves the version it was started with and a request for any other is
 * refused (evaluation, or a frozen policy); syncing by NCCL or other means is left to the user.
 */
import { type CompletionsClient, EngineError } from '../../../serve/completions-client.js';
import { ForwardOnlyPolicy, type ServedPolicy } from './policy-service.js';
import type { GenerateCall, GenerateReply } from './protocol.js';

export type EngineSync = 'disk' | 'none';

export interface ExternalPolicyOptions {
  client: CompletionsClient;
  sync: EngineSync;
  /** The version the engine holds when akbe starts using it (default 0: the base policy). */
  version?: number;
  /** The checkpoint directory of a version, as the engine can read it (sync 'disk'). */
  checkpointDir?: (version: number) => Promise<string>;
  log?: (line: string) => void;
}

export class ExternalPolicy extends ForwardOnlyPolicy implements ServedPolicy {
  private constructor(
    private readonly o: ExternalPolicyOptions,
    readonly context: number,
  ) {
    super(o.version ?? 0);
  }

  /** Connects (reads the engine's model card: its id and context). */
  static async connect(o: ExternalPolicyOptions): Promise<ExternalPolicy> {
    if (o.sync === 'disk' && !o.checkpointDir)
      throw new TypeError("external policy: sync 'disk' needs checkpointDir(version)");
    const card = await o.client.model();
    const context = card.max_model_len;
    if (context === undefined)
      throw new EngineError(
        o.client.base,
        `model ${card.id} has no max_model_len in /v1/models; the context is needed`,
      );
    o.log?.(`external engine ${o.client.base}: model ${card.id}, context ${context}, weight sync ${o.sync}`);
    return new ExternalPolicy(o, context);
  }

  protected async load(version: number): Promise<void> {
    if (this.o.sync === 'none')
      throw new EngineError(
        this.o.client.base,
        `policy version ${version} was requested but the engine serves version ${this.version} and has no weight sync (--engine-sync none)`,
      );
    const dir = await this.o.checkpointDir!(version);
    await this.o.client.loadWeights(dir);
    this.o.log?.(`external engine: loaded policy v${version} from ${dir}`);
  }

  generate(req: GenerateCall): Promise<Omit<GenerateReply, 'version'>> {
    const { policyVersion: _, ...rest } = req;
    return this.o.client.generate(rest);
  }
}
