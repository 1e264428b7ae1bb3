/**
 * Everything one policy needs in the thread that runs it: its config and parameters, the decode
 * session behind a dynamic batcher, the scoring session, and the trainer. `PolicyHost` runs one of
 * these in a worker thread; the CLI uses one directly.
 *
 * Sessions are created lazily (the CLI's `logprobs` never pays for the decode graph), all on the
 * device the first one resolved (so `auto` probes once).
 */
import { Batcher } from './batcher.js';
import { loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { countParams, type GPTConfig, type Params } from './config.js';
import { checkRequest, decodeBatch, type GenerateRequest, type GenerateResult } from './decoder.js';
import { OrtDecodeBackend, OrtScorer, paramFeeds } from './ort-policy.js';
import { type Device, type DeviceChoice, loadOrt, type SessionConfig } from './session.js';
import { type Detokenize, piecesDetokenizer } from './stop.js';

export interface PolicyRuntimeOptions {
  device?: DeviceChoice;
  intraOpThreads?: number;
  log?: (line: string) => void;
  /** Token id -> text piece, for stop strings. */
  vocabPieces?: string[];
  /** Most requests decoded together (default 64). */
  maxBatch?: number;
  /** How long a lone request waits for company (default 3 ms). */
  windowMs?: number;
  /** Trainer options (optimizer, loss), passed through to the Trainer. */
  trainer?: Record<string, unknown>;
}

export interface PolicyInfo {
  config: GPTConfig;
  parameters: number;
  device: Device;
  createMs: { decode: number; score: number };
  /** Per graph: ORT provider -> number of nodes it runs. */
  nodesPerProvider: Record<string, Record<string, number>>;
}

export class PolicyRuntime {
  private params: Params;
  private decodeBackend?: Promise<OrtDecodeBackend>;
  private scorer?: Promise<OrtScorer>;
  private resolvedDevice?: Device;
  private readonly batcher: Batcher;
  private readonly detokenize?: Detokenize;

  private constructor(
    readonly config: GPTConfig,
    params: Params,
    private readonly opts: PolicyRuntimeOptions,
  ) {
    this.params = params;
    this.detokenize = opts.vocabPieces ? piecesDetokenizer(opts.vocabPieces) : undefined;
    this.batcher = new Batcher(async (reqs) => decodeBatch(await this.decoder(), reqs, this.detokenize), {
      maxBatch: opts.maxBatch ?? 64,
      windowMs: opts.windowMs ?? 3,
      validate: (r) =>
        void checkRequest(r, { vocabSize: config.vocab_size, maxPositions: config.n_positions }),
    });
  }

  /** A runtime for an in-memory policy; resolves the device by creating the decode session. */
  static async create(
    config: GPTConfig,
    params: Params,
    opts: PolicyRuntimeOptions = {},
  ): Promise<PolicyRuntime> {
    paramFeeds(await loadOrt(), config, params); // fail early, naming a missing or misshapen parameter
    const rt = new PolicyRuntime(config, params, opts);
    await rt.decoder();
    return rt;
  }

  /** A runtime for a checkpoint directory; sessions are created on first use. */
  static async fromCheckpoint(dir: string, opts: PolicyRuntimeOptions = {}): Promise<PolicyRuntime> {
    const ckpt = await loadCheckpoint(dir, { optimizer: false });
    return new PolicyRuntime(ckpt.config, ckpt.params, opts);
  }

  /** The device sessions run on (resolved by the first session). */
  get device(): Device {
    return (
      this.resolvedDevice ?? (this.opts.device === 'auto' || !this.opts.device ? 'cpu' : this.opts.device)
    );
  }

  private sessionConfig(): SessionConfig {
    return {
      device: this.resolvedDevice ?? this.opts.device ?? 'cpu',
      intraOpThreads: this.opts.intraOpThreads,
      log: this.opts.log,
    };
  }

  private decoder(): Promise<OrtDecodeBackend> {
    this.decodeBackend ??= OrtDecodeBackend.create(this.config, this.params, this.sessionConfig()).then(
      (b) => {
        this.resolvedDevice ??= b.device;
        return b;
      },
    );
    return this.decodeBackend;
  }

  private scoring(): Promise<OrtScorer> {
    this.scorer ??= OrtScorer.create(this.config, this.params, this.sessionConfig()).then((s) => {
      this.resolvedDevice ??= s.device;
      return s;
    });
    return this.scorer;
  }

  /** Decodes one request; concurrent calls are batched. */
  generate(req: GenerateRequest): Promise<GenerateResult> {
    return this.batcher.generate(req);
  }

  /** Decodes these requests as one batch, bypassing the queue. */
  async generateBatch(reqs: GenerateRequest[]): Promise<GenerateResult[]> {
    return decodeBatch(await this.decoder(), reqs, this.detokenize);
  }

  /** log p(x_t | x_<t) for t = 1..L-1 of each sequence. */
  async logprobs(sequences: number[][]): Promise<number[][]> {
    return (await this.scoring()).logprobs(sequences);
  }

  trainStep(_batch: unknown): Promise<Record<string, number>> {
    return Promise.reject(new Error('trainStep: the Trainer is not wired in yet'));
  }

  getParams(): Params {
    return this.params;
  }

  /** Installs a new policy version in every session (batches already running finish on the old one). */
  setParams(params: Params): void {
    this.params = params;
    void this.decodeBackend?.then((b) => b.setParams(params));
    void this.scorer?.then((s) => s.setParams(params));
  }

  async loadCheckpoint(dir: string): Promise<void> {
    const ckpt = await loadCheckpoint(dir, { optimizer: false });
    const same = JSON.stringify(ckpt.config) === JSON.stringify(this.config);
    if (!same)
      throw new Error(
        `${dir}: config.json differs from the running policy's config; start a new policy for it`,
      );
    this.setParams(ckpt.params);
  }

  async saveCheckpoint(dir: string): Promise<void> {
    await saveCheckpoint(dir, { config: this.config, params: this.params });
  }

  async info(): Promise<PolicyInfo> {
    // One after the other: the first resolves the device (auto probes once), the second reuses it.
    const decode = await this.decoder();
    const score = await this.scoring();
    const device = this.device;
    return {
      config: this.config,
      parameters: countParams(this.config),
      device,
      createMs: { decode: decode.createMs, score: score.createMs },
      nodesPerProvider: { decode: await decode.placement(device), score: await score.placement(device) },
    };
  }

  async close(): Promise<void> {
    await this.batcher.close();
    const sessions = await Promise.allSettled(
      [this.decodeBackend, this.scorer].filter((p) => p !== undefined),
    );
    for (const s of sessions) if (s.status === 'fulfilled') await s.value!.release();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
