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
import type { OptimizerState, TrainBatch, TrainerOptions, TrainHyper, TrainMetrics } from './trainer.js';

type Trainer = import('./trainer.js').Trainer;

/** A training request: the batch (B = advantages.length, T = inputIds.length / B) and per-step overrides. */
export interface TrainRequest {
  batch: TrainBatch;
  hyper?: Partial<TrainHyper>;
}

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
  /** Trainer options (loss aggregation and form, hyperparameters); B and T come from each batch. */
  trainer?: Omit<TrainerOptions, 'batch' | 'seq' | 'session'>;
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
  /** Training sessions by batch shape `BxT` (the graph is static); `activeTrainer` holds the state. */
  private readonly trainers = new Map<string, Promise<Trainer>>();
  private activeTrainer?: Trainer;
  private optimizer?: OptimizerState;
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
    await rt.prepare();
    return rt;
  }

  /** A runtime for a checkpoint directory; sessions are created on first use. */
  static async fromCheckpoint(dir: string, opts: PolicyRuntimeOptions = {}): Promise<PolicyRuntime> {
    const ckpt = await loadCheckpoint(dir);
    const rt = new PolicyRuntime(ckpt.config, ckpt.params, opts);
    rt.optimizer = ckpt.optimizer;
    return rt;
  }

  /** The device sessions run on (resolved by the first session). */
  get device(): Device {
    return (
      this.resolvedDevice ?? (this.opts.device === 'auto' || !this.opts.device ? 'cpu' : this.opts.device)
    );
  }

  private sessionConfig(): SessionConfig {
    // The first session logs the device it found; later ones reuse it without repeating that.
    return {
      device: this.resolvedDevice ?? this.opts.device ?? 'cpu',
      intraOpThreads: this.opts.intraOpThreads,
      log: this.resolvedDevice ? undefined : this.opts.log,
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

  /** Creates the decode session now (resolving the device) rather than on the first request. */
  async prepare(): Promise<Device> {
    await this.decoder();
    return this.device;
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

  /**
   * One optimizer step. The trainer for the batch's shape is created on first use; switching
   * shapes carries the parameters and AdamW state over. Afterwards the decode and scoring sessions
   * run the new parameters.
   */
  async trainStep(req: TrainRequest): Promise<TrainMetrics> {
    const B = req.batch.advantages.length;
    const T = B > 0 ? req.batch.inputIds.length / B : 0;
    if (!Number.isInteger(T) || T < 2) {
      throw new Error(
        `train batch: inputIds holds ${req.batch.inputIds.length} ids for ${B} advantages; need B x T with T >= 2`,
      );
    }
    const key = `${B}x${T}`;
    let pending = this.trainers.get(key);
    if (!pending) {
      const { Trainer } = await import('./trainer.js');
      pending = Trainer.create(this.config, this.params, {
        ...this.opts.trainer,
        batch: B,
        seq: T,
        session: this.sessionConfig(),
      });
      this.trainers.set(key, pending);
    }
    const trainer = await pending;
    if (this.activeTrainer !== trainer) {
      // Carry the current policy and optimizer state into this shape's session.
      trainer.setParams(this.params);
      trainer.setOptimizerState(this.activeTrainer?.getOptimizerState() ?? this.optimizer ?? null);
      this.activeTrainer = trainer;
    }
    const metrics = await trainer.step(req.batch, req.hyper);
    this.installParams(trainer.getParams());
    return metrics;
  }

  getParams(): Params {
    return this.params;
  }

  /**
   * Installs a new policy version (optimizer state is kept). Decode batches already running
   * finish on the version they started with.
   */
  setParams(params: Params): void {
    this.installParams(params);
    this.activeTrainer?.setParams(params);
  }

  private installParams(params: Params): void {
    this.params = params;
    void this.decodeBackend?.then((b) => b.setParams(params));
    void this.scorer?.then((s) => s.setParams(params));
  }

  async loadCheckpoint(dir: string): Promise<void> {
    const ckpt = await loadCheckpoint(dir);
    const same = JSON.stringify(ckpt.config) === JSON.stringify(this.config);
    if (!same)
      throw new Error(
        `${dir}: config.json differs from the running policy's config; start a new policy for it`,
      );
    this.setParams(ckpt.params);
    this.optimizer = ckpt.optimizer;
    this.activeTrainer?.setOptimizerState(ckpt.optimizer ?? null);
  }

  /** Writes config, parameters and (once training ran or was loaded) the AdamW state. */
  async saveCheckpoint(dir: string): Promise<void> {
    const optimizer = this.activeTrainer?.getOptimizerState() ?? this.optimizer;
    await saveCheckpoint(dir, {
      config: this.config,
      params: this.params,
      ...(optimizer ? { optimizer } : {}),
    });
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
      nodesPerProvider: { ...(await decode.placement(device)), score: await score.placement(device) },
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
