/**
 * In-process trainer: one ORT session running the training-step graph (src/gpu/train-step.ts)
 * for a fixed (config, B, T, options), with parameters and AdamW moments kept between steps.
 * optimizer 'host' (default): the graph returns gradients, written into buffers allocated once,
 * and src/gpu/adamw.ts updates the parameter and moment arrays in place (bit-equal to 'graph').
 * optimizer 'graph': each step's `new.*` outputs become the next step's inputs, so a step holds
 * the old and the new parameters and moments at once. session.run blocks the event loop: the
 * runtime wraps this class in a worker thread.
 */
import type * as Ort from 'onnxruntime-node';
import { ADAMW_SCALAR_OUTPUTS, type AdamwScalars, adamwInPlace } from './adamw.js';
import { architecture, type PolicyConfig } from './architecture.js';
import { numel, type Params } from './config.js';
import { createSession, loadOrt, type SessionConfig } from './session.js';
import {
  buildTrainGraph,
  decays,
  HYPER_INPUTS,
  type HyperName,
  type METRIC_OUTPUTS,
  type TrainGraphOptions,
} from './train-step.js';

export interface TrainHyper {
  lr: number;
  beta1: number;
  beta2: number;
  /** AdamW epsilon. */
  eps: number;
  weightDecay: number;
  /** Global gradient-norm clip. */
  maxGradNorm: number;
  clipEpsLow: number;
  clipEpsHigh: number;
  /** Dual-clip bound c for negative advantages (> 1). */
  dualClipC: number;
  /** Bound on |log pi - log pi_old| before exp: an overflow guard, not a trust region. */
  ratioClamp: number;
  /** AKBE loss weight. */
  lambda: number;
  /** Decoupled objective only: tokens whose pi_prox / pi_behav exceeds it weigh 0 (> 1). */
  behaviourWeightCap: number;
  /** DPO graphs only: DPO's beta (src/rl/losses.ts DEFAULT_DPO_BETA). */
  dpoBeta: number;
}

export const DEFAULT_TRAIN_HYPER: TrainHyper = {
  lr: 1e-4, // small GPT trained from scratch on RL signal; the run config overrides
  beta1: 0.9,
  beta2: 0.999, // torch defaults
  eps: 1e-8,
  weightDecay: 0.01, // torch AdamW default
  maxGradNorm: 1.0, // verl default
  clipEpsLow: 0.2, // DESIGN.md: PPO clip eps = 0.2
  clipEpsHigh: 0.2,
  dualClipC: 3, // VeRL's clip_ratio_c default (config.dualClip)
  ratioClamp: 20, // VeRL clamps the log-ratio to [-20, 20] (config.logRatioClamp)
  lambda: 0.05, // DESIGN.md: lambda = 0.05
  behaviourWeightCap: 5, // AReaL's example configs (behav_imp_weight_cap: 5); read only by decoupled graphs
  dpoBeta: 0.1, // Rafailov et al. 2023's usual value; read only by DPO graphs
};

/** Where AdamW runs when TrainerOptions.optimizer is not given (run.started records it). */
export const DEFAULT_OPTIMIZER = 'host' as const;

/**
 * The trainer's options: the train graph's loss switches, taken from TrainGraphOptions so a switch
 * is declared once, and what only the trainer decides (its session, optimizer, arena).
 */
export interface TrainerOptions
  extends Pick<
    TrainGraphOptions,
    'batch' | 'seq' | 'aggregation' | 'akbeLoss' | 'dualClip' | 'logRatioClamp' | 'decoupled' | 'dpo'
  > {
  /** float64 is for tests (finite differences); training runs float32. */
  dtype?: 'float32' | 'float64';
  session?: SessionConfig;
  hyper?: Partial<TrainHyper>;
  /**
   * Where AdamW runs: 'host' (default) in place on the trainer's arrays (src/gpu/adamw.ts), or
   * 'graph' inside the train graph (updated copies as outputs). The same weights to the bit.
   */
  optimizer?: 'host' | 'graph';
  logitsChunk?: TrainGraphOptions['logitsChunk'];
  /** ORT's CPU memory arena for the train session (default off: a lower peak, the same bits). */
  cpuArena?: boolean;
}

/** One training batch; flat row-major arrays. */
export interface TrainBatch {
  /** [B, T] token ids (right-padded; padding carries loss_mask 0). */
  inputIds: BigInt64Array | number[];
  /** [B, T-1]: 1 on generated tokens, 0 on prompt / tool-observation / padding tokens. */
  lossMask: ArrayLike<number>;
  /** [B, T-1] logprobs of the rollout (behaviour) policy. */
  oldLogprobs: ArrayLike<number>;
  /** [B, T-1] logprobs of the proximal policy (the version before this update); decoupled trainers only. */
  proxLogprobs?: ArrayLike<number>;
  /** [B] per-sequence advantages. */
  advantages: ArrayLike<number>;
  /** [B] 1 for GRPO samples (default: 1 for every row). */
  pgWeight?: ArrayLike<number>;
  /** [B] each row's weight in L_AKBE's token sum, > 0 on target sequences (src/rl/batch.ts akbeRowWeights; default: 0). */
  akbeWeight?: ArrayLike<number>;
  /** DPO trainers only: [B, B] pair slots (+1 chosen, -1 rejected), [B] slot weights, [B] reference sequence logprobs. */
  dpoPairs?: ArrayLike<number>;
  dpoWeight?: ArrayLike<number>;
  refLogp?: ArrayLike<number>;
}

export interface TrainMetrics {
  step: number;
  loss: number;
  pgLoss: number;
  akbeLoss: number;
  /** L_DPO (DPO trainers only). */
  dpoLoss?: number;
  /** Before clipping. */
  gradNorm: number;
  clipFrac: number;
  /** k3 estimator of KL(pi_old || pi) over GRPO tokens. */
  approxKl: number;
  entropy: number;
  ms: number;
}

export interface OptimizerState {
  m: Params;
  v: Params;
  step: number;
}

/** A batch, parameter or moment array whose length does not match the trainer's (config, B, T). */
export class TrainBatchShapeError extends Error {
  constructor(
    readonly field: string,
    readonly expected: number,
    readonly got: number,
  ) {
    super(`trainer: ${field} has ${got} values, expected ${expected}`);
    this.name = 'TrainBatchShapeError';
  }
}

const HYPER_KEY: Record<Exclude<HyperName, 'step'>, keyof TrainHyper> = {
  lr: 'lr',
  beta1: 'beta1',
  beta2: 'beta2',
  adam_eps: 'eps',
  weight_decay: 'weightDecay',
  max_grad_norm: 'maxGradNorm',
  clip_eps_low: 'clipEpsLow',
  clip_eps_high: 'clipEpsHigh',
  dual_clip_c: 'dualClipC',
  ratio_clamp: 'ratioClamp',
  lambda: 'lambda',
};

type FloatArray = Float32Array | Float64Array;

export class Trainer {
  /** Parameters, and with optimizer 'graph' the moments (`adam_m.` / `adam_v.` names). */
  private state = new Map<string, Ort.Tensor>();
  /** optimizer 'host': the moments, and the gradient buffers the session writes into. */
  private readonly moments = { m: new Map<string, FloatArray>(), v: new Map<string, FloatArray>() };
  private readonly grads = new Map<string, Ort.Tensor>();
  private readonly shapes: ReturnType<ReturnType<typeof architecture>['paramShapes']>;
  private stepCount = 0;
  readonly hyper: TrainHyper;

  private constructor(
    private readonly ort: typeof Ort,
    private readonly session: Ort.InferenceSession,
    readonly cfg: PolicyConfig,
    readonly opts: TrainerOptions,
    /** Session creation time (ms), for benchmarks. */
    readonly createMs: number,
  ) {
    this.hyper = { ...DEFAULT_TRAIN_HYPER, ...opts.hyper };
    this.shapes = architecture(cfg).paramShapes();
  }

  /** Builds the graph and the session once; `params` are copied in, moments start at zero. */
  static async create(cfg: PolicyConfig, params: Params, opts: TrainerOptions): Promise<Trainer> {
    const ort = await loadOrt();
    const bytes = buildTrainGraph(cfg, {
      ...opts,
      optimizer: opts.optimizer ?? DEFAULT_OPTIMIZER,
    }).serialize();
    // Without the arena, ORT's freed blocks go back to malloc (and large ones to the OS) instead of
    // staying reserved: with it, the second run's memory-pattern block came on top of the first
    // run's cached blocks (+1.5 GiB on the Qwen3-shaped 103M policy; BENCHMARKS.md).
    const { session, createMs } = await createSession(bytes, opts.session ?? {}, {
      enableCpuMemArena: opts.cpuArena === true,
    });
    const trainer = new Trainer(ort, session, cfg, opts, createMs);
    trainer.setParams(params);
    trainer.setOptimizerState(null);
    return trainer;
  }

  private get dtype() {
    return this.opts.dtype ?? 'float32';
  }

  private get host() {
    return (this.opts.optimizer ?? DEFAULT_OPTIMIZER) === 'host';
  }

  /** `values` copied into `into` when it exists (host: arrays are updated in place), else a new array. */
  private array(values: ArrayLike<number>, n: number, field: string, into?: FloatArray): FloatArray {
    if (values.length !== n) throw new TrainBatchShapeError(field, n, values.length);
    if (!into) return this.dtype === 'float64' ? Float64Array.from(values) : Float32Array.from(values);
    into.set(values);
    return into;
  }

  private tensor(values: ArrayLike<number>, dims: number[], field: string): Ort.Tensor {
    const n = numel(dims);
    if (values.length !== n) throw new TrainBatchShapeError(field, n, values.length);
    const data = this.dtype === 'float64' ? Float64Array.from(values) : Float32Array.from(values);
    return new this.ort.Tensor(this.dtype, data, dims);
  }

  /** Replaces the parameters (moments and step are kept: call setOptimizerState(null) to reset). */
  setParams(params: Params): void {
    for (const { name, shape } of this.shapes) {
      const p = params.get(name);
      if (!p) throw new TrainBatchShapeError(`params.${name}`, numel(shape), 0);
      const kept = this.host ? this.state.get(name) : undefined;
      if (kept) this.array(p, numel(shape), `params.${name}`, kept.data as FloatArray);
      else this.state.set(name, this.tensor(p, shape, `params.${name}`));
    }
  }

  /** A float32 copy of the current parameters. */
  getParams(): Params {
    return this.read((name) => this.state.get(name)!.data as FloatArray);
  }

  getOptimizerState(): OptimizerState {
    const moment = (k: 'm' | 'v') =>
      this.host
        ? (name: string) => this.moments[k].get(name)!
        : (name: string) => this.state.get(`adam_${k}.${name}`)!.data as FloatArray;
    return { m: this.read(moment('m')), v: this.read(moment('v')), step: this.stepCount };
  }

  /** Restores AdamW moments and step; null resets them to zero. */
  setOptimizerState(s: OptimizerState | null): void {
    for (const { name, shape } of this.shapes) {
      const n = numel(shape);
      const zeros = new Float32Array(n);
      for (const k of ['m', 'v'] as const) {
        const values = s?.[k].get(name) ?? zeros;
        const field = `adam_${k}.${name}`;
        if (this.host) this.moments[k].set(name, this.array(values, n, field, this.moments[k].get(name)));
        else this.state.set(field, this.tensor(values, shape, field));
      }
    }
    this.stepCount = s?.step ?? 0;
  }

  private read(get: (name: string) => FloatArray): Params {
    return new Map(this.shapes.map(({ name }) => [name, Float32Array.from(get(name))]));
  }

  /** One optimizer step on `batch`; `hyper` overrides this step's hyperparameters (lr schedules). */
  async step(batch: TrainBatch, hyper: Partial<TrainHyper> = {}): Promise<TrainMetrics> {
    const t0 = performance.now();
    const { batch: B, seq: T } = this.opts;
    const h = { ...this.hyper, ...hyper };
    const ids =
      batch.inputIds instanceof BigInt64Array ? batch.inputIds : BigInt64Array.from(batch.inputIds, BigInt);
    if (ids.length !== B * T) throw new TrainBatchShapeError('inputIds', B * T, ids.length);
    const ones = new Array<number>(B).fill(1);
    const feeds: Record<string, Ort.Tensor> = Object.fromEntries(this.state);
    feeds.input_ids = new this.ort.Tensor('int64', ids, [B, T]);
    feeds.loss_mask = this.tensor(batch.lossMask, [B, T - 1], 'lossMask');
    feeds.old_logprobs = this.tensor(batch.oldLogprobs, [B, T - 1], 'oldLogprobs');
    if (this.opts.decoupled) {
      if (!batch.proxLogprobs) throw new TrainBatchShapeError('proxLogprobs', B * (T - 1), 0);
      feeds.prox_logprobs = this.tensor(batch.proxLogprobs, [B, T - 1], 'proxLogprobs');
      feeds.behaviour_weight_cap = this.tensor([h.behaviourWeightCap], [], 'behaviourWeightCap');
    }
    if (this.opts.dpo) {
      const need = (v: ArrayLike<number> | undefined, field: string, n: number) => {
        if (!v) throw new TrainBatchShapeError(field, n, 0);
        return v;
      };
      feeds.dpo_pairs = this.tensor(need(batch.dpoPairs, 'dpoPairs', B * B), [B, B], 'dpoPairs');
      feeds.dpo_weight = this.tensor(need(batch.dpoWeight, 'dpoWeight', B), [B], 'dpoWeight');
      feeds.ref_logprobs = this.tensor(need(batch.refLogp, 'refLogp', B), [B], 'refLogp');
      feeds.dpo_beta = this.tensor([h.dpoBeta], [], 'dpoBeta');
    }
    feeds.advantages = this.tensor(batch.advantages, [B], 'advantages');
    feeds.pg_weight = this.tensor(batch.pgWeight ?? ones, [B], 'pgWeight');
    feeds.akbe_weight = this.tensor(batch.akbeWeight ?? new Array<number>(B).fill(0), [B], 'akbeWeight');
    const step = this.stepCount + 1;
    for (const n of HYPER_INPUTS) {
      if (this.host && n === 'adam_eps') continue; // the host update adds eps
      feeds[n] = this.tensor([n === 'step' ? step : h[HYPER_KEY[n]]], [], n);
    }

    const out = this.host ? await this.hostStep(feeds, h) : await this.session.run(feeds);
    if (!this.host)
      for (const { name } of this.shapes) {
        this.state.set(name, out[`new.${name}`]);
        this.state.set(`adam_m.${name}`, out[`new_adam_m.${name}`]);
        this.state.set(`adam_v.${name}`, out[`new_adam_v.${name}`]);
      }
    this.stepCount = step;
    const scalar = (n: (typeof METRIC_OUTPUTS)[number]) => Number((out[n].data as FloatArray)[0]);
    return {
      step,
      loss: scalar('loss'),
      pgLoss: scalar('pg_loss'),
      akbeLoss: scalar('akbe_loss'),
      ...(this.opts.dpo ? { dpoLoss: Number((out.dpo_loss.data as FloatArray)[0]) } : {}),
      gradNorm: scalar('grad_norm'),
      clipFrac: scalar('clip_frac'),
      approxKl: scalar('approx_kl'),
      entropy: scalar('entropy'),
      ms: performance.now() - t0,
    };
  }

  /** Runs the graph into the gradient buffers, then AdamW in place (src/gpu/adamw.ts). */
  private async hostStep(
    feeds: Record<string, Ort.Tensor>,
    h: TrainHyper,
  ): Promise<Ort.InferenceSession.ReturnType> {
    const fetches: Record<string, Ort.Tensor | null> = {};
    for (const n of this.session.outputNames) fetches[n] = null;
    for (const { name, shape } of this.shapes) {
      let gr = this.grads.get(name);
      if (!gr) {
        const data =
          this.dtype === 'float64' ? new Float64Array(numel(shape)) : new Float32Array(numel(shape));
        gr = new this.ort.Tensor(this.dtype, data, shape);
        this.grads.set(name, gr);
      }
      fetches[`grad.${name}`] = gr;
    }
    const out = await this.session.run(feeds, fetches);
    const scalar = (n: string) => Number((out[n].data as FloatArray)[0]);
    const s: AdamwScalars = {
      beta1: h.beta1,
      beta2: h.beta2,
      eps: h.eps,
      s1: 0,
      s2: 0,
      stepSize: 0,
      invSqrtBc2: 0,
      keep: 0,
    };
    for (const [k, n] of Object.entries(ADAMW_SCALAR_OUTPUTS))
      s[k as keyof typeof ADAMW_SCALAR_OUTPUTS] = scalar(n);
    for (const { name, shape } of this.shapes) {
      const p = this.state.get(name)!.data as FloatArray;
      const g = this.grads.get(name)!.data as FloatArray;
      adamwInPlace(p, this.moments.m.get(name)!, this.moments.v.get(name)!, g, s, decays(shape));
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
