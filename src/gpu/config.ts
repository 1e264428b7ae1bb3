/**
 * GPT-2 policy configuration, parameter layout and initialisation.
 *
 * Field names follow Hugging Face `GPT2Config`, and parameter names follow `GPT2LMHeadModel`
 * without the `transformer.` prefix, so a checkpoint written by `src/gpu/checkpoint.ts` loads in
 * PyTorch tooling. Weights use the Conv1D layout [in, out], which is exactly what `x @ W` needs:
 * the in-memory layout equals the Hugging Face layout, no transposes anywhere. The LM head is tied
 * to `wte` (logits = h @ wte^T), so it has no parameter of its own.
 */
import { Rng } from '../util/rng.js';

export interface GPTConfig {
  /** Token vocabulary size V. */
  vocab_size: number;
  /** Model width D (must be divisible by n_head). */
  n_embd: number;
  /** Number of transformer blocks L. */
  n_layer: number;
  /** Attention heads H; head_dim = D / H. */
  n_head: number;
  /** Learned position table size P: the longest sequence the policy can see. */
  n_positions: number;
  /** LayerNorm epsilon: GPT-2 uses 1e-5. */
  layer_norm_epsilon: number;
  /** 'gelu_new' is GPT-2's tanh approximation of GELU; the only activation we build. */
  activation_function: 'gelu_new';
}

/** Defaults for a small policy that trains on one CPU core in well under a second per step. */
export const DEFAULT_GPT_CONFIG: GPTConfig = {
  vocab_size: 512, // small world vocabulary; the tokenizer owns the real number
  n_embd: 256, // d256: ~3.3M parameters with 4 layers
  n_layer: 4,
  n_head: 4, // head_dim 64, the GPT-2 value
  n_positions: 256, // rollouts longer than this are truncated by the caller
  layer_norm_epsilon: 1e-5, // GPT-2 value
  activation_function: 'gelu_new',
};

/** A config.json that is not a usable policy config; `key` names the offending field. */
export class InvalidPolicyConfigError extends Error {
  constructor(
    readonly key: string,
    message: string,
    readonly file?: string,
    opts?: ErrorOptions,
  ) {
    super(`${file ? `${file}: ` : ''}config key '${key}' ${message}`, opts);
    this.name = 'InvalidPolicyConfigError';
  }
}

/** A config.json that is not a usable GPT-2 config. */
export class InvalidGPTConfigError extends InvalidPolicyConfigError {
  override readonly name = 'InvalidGPTConfigError';
}

const POSITIVE_INT_KEYS = ['vocab_size', 'n_embd', 'n_layer', 'n_head', 'n_positions'] as const;

/**
 * Checks a parsed config.json (extra Hugging Face keys are ignored) and returns a GPTConfig.
 * Missing `layer_norm_epsilon` / `activation_function` take the GPT-2 defaults.
 * Throws InvalidGPTConfigError naming the bad key (and `file`, when given).
 */
export function validateGPTConfig(json: unknown, file?: string): GPTConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new InvalidGPTConfigError('(root)', 'must be a JSON object', file);
  }
  const o = json as Record<string, unknown>;
  for (const key of POSITIVE_INT_KEYS) {
    const v = o[key];
    if (v === undefined) throw new InvalidGPTConfigError(key, 'is missing', file);
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
      throw new InvalidGPTConfigError(key, `must be a positive integer, got ${JSON.stringify(v)}`, file);
    }
  }
  const eps = o.layer_norm_epsilon ?? 1e-5;
  if (typeof eps !== 'number' || !(eps > 0) || !Number.isFinite(eps)) {
    throw new InvalidGPTConfigError(
      'layer_norm_epsilon',
      `must be a positive number, got ${JSON.stringify(eps)}`,
      file,
    );
  }
  const act = o.activation_function ?? 'gelu_new';
  if (act !== 'gelu_new') {
    throw new InvalidGPTConfigError(
      'activation_function',
      `must be 'gelu_new', got ${JSON.stringify(act)}`,
      file,
    );
  }
  const cfg: GPTConfig = {
    vocab_size: o.vocab_size as number,
    n_embd: o.n_embd as number,
    n_layer: o.n_layer as number,
    n_head: o.n_head as number,
    n_positions: o.n_positions as number,
    layer_norm_epsilon: eps,
    activation_function: 'gelu_new',
  };
  if (cfg.n_embd % cfg.n_head !== 0) {
    throw new InvalidGPTConfigError('n_head', `must divide n_embd (${cfg.n_embd}), got ${cfg.n_head}`, file);
  }
  return cfg;
}

/** config.json as Hugging Face writes it for GPT-2, with our dropout-free training made explicit. */
export function gpt2ConfigJson(cfg: GPTConfig): Record<string, unknown> {
  return {
    architectures: ['GPT2LMHeadModel'],
    model_type: 'gpt2',
    vocab_size: cfg.vocab_size,
    n_positions: cfg.n_positions,
    n_ctx: cfg.n_positions, // older transformers versions read n_ctx
    n_embd: cfg.n_embd,
    n_layer: cfg.n_layer,
    n_head: cfg.n_head,
    n_inner: null, // 4 * n_embd
    activation_function: cfg.activation_function,
    layer_norm_epsilon: cfg.layer_norm_epsilon,
    initializer_range: 0.02,
    // Our graphs have no dropout; zero here makes PyTorch's train mode compute the same function.
    resid_pdrop: 0.0,
    embd_pdrop: 0.0,
    attn_pdrop: 0.0,
    scale_attn_weights: true,
    tie_word_embeddings: true,
    torch_dtype: 'float32',
  };
}

export interface ParamShape {
  name: string;
  shape: number[];
}

/** Parameters in their fixed order (the order of graph inputs, checkpoints and optimizer state). */
export function gpt2ParamShapes(cfg: GPTConfig): ParamShape[] {
  const { vocab_size: V, n_embd: D, n_positions: P } = cfg;
  const out: ParamShape[] = [
    { name: 'wte.weight', shape: [V, D] },
    { name: 'wpe.weight', shape: [P, D] },
  ];
  for (let i = 0; i < cfg.n_layer; i++) {
    const h = `h.${i}`;
    out.push(
      { name: `${h}.ln_1.weight`, shape: [D] },
      { name: `${h}.ln_1.bias`, shape: [D] },
      { name: `${h}.attn.c_attn.weight`, shape: [D, 3 * D] },
      { name: `${h}.attn.c_attn.bias`, shape: [3 * D] },
      { name: `${h}.attn.c_proj.weight`, shape: [D, D] },
      { name: `${h}.attn.c_proj.bias`, shape: [D] },
      { name: `${h}.ln_2.weight`, shape: [D] },
      { name: `${h}.ln_2.bias`, shape: [D] },
      { name: `${h}.mlp.c_fc.weight`, shape: [D, 4 * D] },
      { name: `${h}.mlp.c_fc.bias`, shape: [4 * D] },
      { name: `${h}.mlp.c_proj.weight`, shape: [4 * D, D] },
      { name: `${h}.mlp.c_proj.bias`, shape: [D] },
    );
  }
  out.push({ name: 'ln_f.weight', shape: [D] }, { name: 'ln_f.bias', shape: [D] });
  return out;
}

export type Params = Map<string, Float32Array>;

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Total parameter count (tied LM head counted once). */
export function countParams(cfg: GPTConfig): number {
  return gpt2ParamShapes(cfg).reduce((n, p) => n + numel(p.shape), 0);
}

/**
 * GPT-2 initialisation: weights ~ N(0, 0.02); residual projections (attn.c_proj, mlp.c_proj)
 * ~ N(0, 0.02 / sqrt(2 L)) so the residual stream's variance does not grow with depth; biases 0;
 * LayerNorm weight 1, bias 0. Each tensor draws from its own stream (`deriveSeed`-free: one Rng in
 * the fixed parameter order), so the same seed always gives the same policy.
 */
export function initParams(cfg: GPTConfig, seed: number): Params {
  const rng = new Rng(seed);
  const params: Params = new Map();
  const projStd = 0.02 / Math.sqrt(2 * cfg.n_layer);
  for (const { name, shape } of gpt2ParamShapes(cfg)) {
    const data = new Float32Array(numel(shape));
    if (/ln_\w+\.weight$/.test(name)) data.fill(1);
    else if (name.endsWith('.weight')) {
      const std = name.endsWith('c_proj.weight') ? projStd : 0.02;
      for (let i = 0; i < data.length; i++) data[i] = rng.normal() * std;
    }
    params.set(name, data);
  }
  return params;
}
