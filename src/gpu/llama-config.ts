/**
 * Llama-family configuration (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM), read from a
 * Hugging Face `config.json`, with the parameter layout and initialisation.
 *
 * Field names are the Hugging Face ones. Parameter names are exactly the `state_dict` keys of
 * the `*ForCausalLM` model (`model.layers.0.self_attn.q_proj.weight`, ...) and weights keep the
 * nn.Linear layout [out, in], so a checkpoint is the parameter map written as it is: transformers
 * and vLLM load it without a conversion step. The three families differ only in biases and norms:
 *
 *   family  q/k/v bias        o_proj bias       mlp bias     q_norm/k_norm (RMSNorm over head_dim)
 *   llama   attention_bias    attention_bias    mlp_bias     no
 *   qwen2   always            never             never        no
 *   qwen3   attention_bias    attention_bias    never        yes
 */
import { Rng } from '../util/rng.js';
import { InvalidPolicyConfigError, numel, type ParamShape, type Params } from './config.js';

export const LLAMA_FAMILIES = ['llama', 'qwen2', 'qwen3'] as const;
export type LlamaFamily = (typeof LLAMA_FAMILIES)[number];

/** `architectures[0]` of each family's config.json. */
export const ARCHITECTURE_OF: Record<LlamaFamily, string> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
};

export interface LlamaConfig {
  /** The family (Hugging Face `model_type`); it fixes which biases and norms exist. */
  model_type: LlamaFamily;
  vocab_size: number;
  /** Model width D. */
  hidden_size: number;
  /** SwiGLU inner width I. */
  intermediate_size: number;
  num_hidden_layers: number;
  /** Query heads H. */
  num_attention_heads: number;
  /** Key/value heads K (grouped-query attention: H / K query heads share one; K = H is plain MHA). */
  num_key_value_heads: number;
  /** Per-head width hd; may differ from D / H (Qwen3-0.6B: 1024 / 16 heads, head_dim 128). */
  head_dim: number;
  /** The longest sequence the policy is run on (rotary embeddings have no table to outgrow). */
  max_position_embeddings: number;
  rms_norm_eps: number;
  /** Rotary base: inv_freq_i = rope_theta^(-2i / hd). */
  rope_theta: number;
  /** LM head = embed_tokens^T (no `lm_head.weight`) when true. */
  tie_word_embeddings: boolean;
  /** llama / qwen3: bias on q, k, v and o projections. */
  attention_bias: boolean;
  /** llama: bias on gate, up and down projections. */
  mlp_bias: boolean;
  /** Std of the normal init of every matrix and embedding. */
  initializer_range: number;
}

/** A config.json that is not a usable Llama-family config. */
export class InvalidLlamaConfigError extends InvalidPolicyConfigError {
  override readonly name = 'InvalidLlamaConfigError';
}

/** The family of a config.json (by `model_type`, else `architectures[0]`), or undefined if not ours. */
export function llamaFamilyOf(json: Record<string, unknown>): LlamaFamily | undefined {
  const mt = json.model_type;
  if (typeof mt === 'string' && (LLAMA_FAMILIES as readonly string[]).includes(mt)) return mt as LlamaFamily;
  const arch = Array.isArray(json.architectures) ? json.architectures[0] : undefined;
  return LLAMA_FAMILIES.find((f) => ARCHITECTURE_OF[f] === arch);
}

const POSITIVE_INT_KEYS = [
  'vocab_size',
  'hidden_size',
  'intermediate_size',
  'num_hidden_layers',
  'num_attention_heads',
] as const;

/**
 * Checks a parsed Llama/Qwen2/Qwen3 config.json (extra keys are ignored) and returns a
 * LlamaConfig with the family defaults filled in. Features this implementation does not compute
 * (rope_scaling other than the default, sliding-window attention, activations other than SiLU)
 * are refused by name rather than silently computing a different model.
 */
export function validateLlamaConfig(json: Record<string, unknown>, file?: string): LlamaConfig {
  const fail = (key: string, msg: string): never => {
    throw new InvalidLlamaConfigError(key, msg, file);
  };
  const family = llamaFamilyOf(json) ?? fail('model_type', `must be one of ${LLAMA_FAMILIES.join(', ')}`);
  const int = (key: string, fallback?: number): number => {
    const v = json[key] ?? fallback;
    if (v === undefined || v === null) return fail(key, 'is missing');
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
      return fail(key, `must be a positive integer, got ${JSON.stringify(v)}`);
    return v;
  };
  const positive = (key: string, fallback: number): number => {
    const v = json[key] ?? fallback;
    if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v))
      return fail(key, `must be a positive number, got ${JSON.stringify(v)}`);
    return v;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = json[key] ?? fallback;
    if (typeof v !== 'boolean') return fail(key, `must be true or false, got ${JSON.stringify(v)}`);
    return v;
  };
  for (const key of POSITIVE_INT_KEYS) int(key);
  const D = json.hidden_size as number;
  const H = json.num_attention_heads as number;
  const K = int('num_key_value_heads', H);
  if (H % K !== 0) fail('num_key_value_heads', `must divide num_attention_heads (${H}), got ${K}`);
  const hd = int('head_dim', Number.isInteger(D / H) ? D / H : undefined);
  if (hd % 2 !== 0) fail('head_dim', `must be even (rotary embeddings pair dimensions), got ${hd}`);
  const act = json.hidden_act ?? 'silu';
  if (act !== 'silu') fail('hidden_act', `must be 'silu' (SwiGLU), got ${JSON.stringify(act)}`);
  const scaling = json.rope_scaling;
  if (scaling !== undefined && scaling !== null) {
    const kind = (scaling as Record<string, unknown>).rope_type ?? (scaling as Record<string, unknown>).type;
    if (kind !== 'default')
      fail(
        'rope_scaling',
        `of type ${JSON.stringify(kind)} is not supported (only plain rotary embeddings: set rope_scaling to null and keep sequences within the original max_position_embeddings)`,
      );
  }
  if (family !== 'llama' && json.use_sliding_window === true)
    fail('use_sliding_window', 'is not supported (full causal attention only): set it to false');
  if (family !== 'llama' && json.mlp_bias === true) fail('mlp_bias', `does not exist in ${family}`);
  return {
    model_type: family,
    vocab_size: json.vocab_size as number,
    hidden_size: D,
    intermediate_size: json.intermediate_size as number,
    num_hidden_layers: json.num_hidden_layers as number,
    num_attention_heads: H,
    num_key_value_heads: K,
    head_dim: hd,
    max_position_embeddings: int('max_position_embeddings', 2048),
    rms_norm_eps: positive('rms_norm_eps', 1e-6),
    rope_theta: positive('rope_theta', 10000),
    tie_word_embeddings: bool('tie_word_embeddings', false),
    attention_bias: family === 'qwen2' ? true : bool('attention_bias', false),
    mlp_bias: family === 'llama' ? bool('mlp_bias', false) : false,
    initializer_range: positive('initializer_range', 0.02),
  };
}

/** Which optional tensors a config has (see the family table at the top). */
export function llamaLayout(cfg: LlamaConfig) {
  return {
    qkvBias: cfg.attention_bias,
    oBias: cfg.model_type !== 'qwen2' && cfg.attention_bias,
    mlpBias: cfg.mlp_bias,
    qkNorm: cfg.model_type === 'qwen3',
  };
}

/** Parameters in their fixed order (graph inputs, checkpoints, optimizer state). */
export function llamaParamShapes(cfg: LlamaConfig): ParamShape[] {
  const { vocab_size: V, hidden_size: D, intermediate_size: I, head_dim: hd } = cfg;
  const qDim = cfg.num_attention_heads * hd;
  const kvDim = cfg.num_key_value_heads * hd;
  const lay = llamaLayout(cfg);
  const out: ParamShape[] = [{ name: 'model.embed_tokens.weight', shape: [V, D] }];
  const linear = (name: string, nOut: number, nIn: number, bias: boolean) => {
    out.push({ name: `${name}.weight`, shape: [nOut, nIn] });
    if (bias) out.push({ name: `${name}.bias`, shape: [nOut] });
  };
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const l = `model.layers.${i}`;
    out.push({ name: `${l}.input_layernorm.weight`, shape: [D] });
    linear(`${l}.self_attn.q_proj`, qDim, D, lay.qkvBias);
    linear(`${l}.self_attn.k_proj`, kvDim, D, lay.qkvBias);
    linear(`${l}.self_attn.v_proj`, kvDim, D, lay.qkvBias);
    linear(`${l}.self_attn.o_proj`, D, qDim, lay.oBias);
    if (lay.qkNorm) {
      out.push({ name: `${l}.self_attn.q_norm.weight`, shape: [hd] });
      out.push({ name: `${l}.self_attn.k_norm.weight`, shape: [hd] });
    }
    out.push({ name: `${l}.post_attention_layernorm.weight`, shape: [D] });
    linear(`${l}.mlp.gate_proj`, I, D, lay.mlpBias);
    linear(`${l}.mlp.up_proj`, I, D, lay.mlpBias);
    linear(`${l}.mlp.down_proj`, D, I, lay.mlpBias);
  }
  out.push({ name: 'model.norm.weight', shape: [D] });
  if (!cfg.tie_word_embeddings) out.push({ name: 'lm_head.weight', shape: [V, D] });
  return out;
}

/** RMSNorm weights (`*norm.weight`, `*_layernorm.weight`) start at 1. */
export const isNormWeight = (name: string) => /norm\.weight$/.test(name);

/**
 * The families' `_init_weights`: every matrix and embedding ~ N(0, initializer_range), biases 0,
 * RMSNorm weights 1. One Rng over the fixed parameter order, so a seed always gives the same policy.
 */
export function initLlamaParams(cfg: LlamaConfig, seed: number): Params {
  const rng = new Rng(seed);
  const params: Params = new Map();
  for (const { name, shape } of llamaParamShapes(cfg)) {
    const data = new Float32Array(numel(shape));
    if (isNormWeight(name)) data.fill(1);
    else if (name.endsWith('.weight')) {
      for (let i = 0; i < data.length; i++) data[i] = rng.normal() * cfg.initializer_range;
    }
    params.set(name, data);
  }
  return params;
}

/** config.json as transformers writes it for the family (what vLLM and `from_pretrained` read). */
export function llamaConfigJson(cfg: LlamaConfig): Record<string, unknown> {
  const json: Record<string, unknown> = {
    architectures: [ARCHITECTURE_OF[cfg.model_type]],
    model_type: cfg.model_type,
    vocab_size: cfg.vocab_size,
    hidden_size: cfg.hidden_size,
    intermediate_size: cfg.intermediate_size,
    num_hidden_layers: cfg.num_hidden_layers,
    num_attention_heads: cfg.num_attention_heads,
    num_key_value_heads: cfg.num_key_value_heads,
    head_dim: cfg.head_dim,
    hidden_act: 'silu',
    max_position_embeddings: cfg.max_position_embeddings,
    rms_norm_eps: cfg.rms_norm_eps,
    rope_theta: cfg.rope_theta,
    rope_scaling: null,
    tie_word_embeddings: cfg.tie_word_embeddings,
    initializer_range: cfg.initializer_range,
    attention_dropout: 0.0,
    torch_dtype: 'float32',
  };
  if (cfg.model_type !== 'qwen2') json.attention_bias = cfg.attention_bias;
  if (cfg.model_type === 'llama') json.mlp_bias = cfg.mlp_bias;
  else json.use_sliding_window = false;
  return json;
}
