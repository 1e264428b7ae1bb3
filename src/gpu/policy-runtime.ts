/**
 * Everything one policy needs in the thread that runs it: its config and parameters, the decode
 * session behind a continuous batcher (continuous.ts), the scoring session, and the trainer. `PolicyHost` runs one of
 * these in a worker thread; the CLI uses one directly.
 *
 * Sessions are created lazily (the CLI's `logprobs` never pays for the decode graph), all on the
 * device the first one resolved (so `auto` probes once).
 */

import { architecture, countParams, type PolicyConfig } from './architecture.js';
import { loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import type { Params } from './config.js';
import { ContinuousBatcher } from './continuous.js';
import { checkRequest, decodeBatch, type GenerateRequest, type GenerateResult } from './decoder.js';
import type { WeightsDtype } from './model-inputs.js';
import { OrtDecodeBackend, OrtScorer, paramFeeds } from './ort-policy.js';
import { type Device, type DeviceChoice, loadOrt, type SessionConfig } from './session.js';
import { type Detokenize, piecesDetokenizer } from './stop.js';
import type { OptimizerState, TrainBatch, TrainerOptions, TrainHyper, TrainMetrics } from './trainer.js';
import { Trainer } from './trainer.js';

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
  /** Most tokens one decode iteration feeds the model: prefilled prompts + one per row (default 8192). */
  maxBatchTokens?: number;
  /** How long a lone request waits for company (default 3 ms). */
  windowMs?: number;
  /** Trainer options (loss aggregation and form, hyperparameters); B and T come from each batch. */
  trainer?: Omit<TrainerOptions, 'batch' | 'seq' | 'session'>;
  /** How the decode and scoring graphs take the weights (model-inputs.ts; training is float32). */
  weights?: WeightsDtype;
  /**
   * Decode every request to the same bits whatever it is batched with (row-batches.ts CachedRows:
   * a fixed cache length, prompts prefilled alone, never a one-row step), at some cost in speed.
   */
  batchInvariant?: boolean;
}

export interface PolicyInfo {
  config: PolicyConfig;
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
  private readonly batcher: ContinuousBatcher;
  /** Training sessions by batch shape `BxT` (the graph is static); `activeTrainer` holds the state. */
  private readonly trainers = new Map<string, Promise<Trainer>>();
  private activeTrainer?: Trainer;
  private optimizer?: OptimizerState;
  private readonly detokenize?: Detokenize;

  private constructor(
    readonly config: PolicyConfig,
    params: Params,
    private readonly opts: PolicyRuntimeOptions,
  ) {
    this.params = params;
    this.detokenize = opts.vocabPieces ? piecesDetokenizer(opts.vocabPieces) : undefined;
    this.batcher = new ContinuousBatcher(() => this.decoder(), {
      maxBatch: opts.maxBatch ?? 64,
      maxBatchTokens: opts.maxBatchTokens ?? 8192,
      windowMs: opts.windowMs ?? 3,
      detokenize: this.detokenize,
      validate: (r) =>
        void checkRequest(r, {
          vocabSize: architecture(config).vocabSize,
          maxPositions: architecture(config).maxPositions,
        }),
    });
  }

  /** A runtime for an in-memory policy; resolves the device by creating the decode session. */
  static async create(
    config: PolicyConfig,
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
    const weights = { weights: this.opts.weights, batchInvariant: this.opts.batchInvariant };
    this.decodeBackend ??= OrtDecodeBackend.create(
      this.config,
      this.params,
      this.sessionConfig(),
      weights,
    ).then((b) => {
      this.resolvedDevice ??= b.device;
      return b;
    });
    return this.decodeBackend;
  }

  private scoring(): Promise<OrtScorer> {
    const weights = { weights: this.opts.weights };
    this.scorer ??= OrtScorer.create(this.config, this.params, this.sessionConfig(), weights).then((s) => {
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

  /** Decodes one request; it joins the running batch at the next step (continuous batching). */
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

  /**
   * Holds the current parameters as policy `version`: requests naming it decode on them even after
   * training or a load moves the current ones (asynchronous runs). The newest `keep` versions stay.
   */
  async holdVersion(version: number, keep: number): Promise<void> {
    // After any pending setParams (installParams' then() was registered first).
    (await this.decoder()).holdVersion(version, keep);
  }

  /** Loads checkpoint `dir` as policy `version` for decoding only (the current parameters stay). */
  async loadVersion(version: number, dir: string, keep: number): Promise<void> {
    const ckpt = await loadCheckpoint(dir);
    if (JSON.stringify(ckpt.config) !== JSON.stringify(this.config))
      throw new Error(`${dir}: config.json differs from the running policy's config`);
    (await this.decoder()).holdVersion(version, keep, ckpt.params);
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
