/**
 * The architectures a policy can have, behind one interface: GPT-2 (model.ts) and the Llama
 * family (llama.ts). Graph builders, sessions, the trainer and checkpoints see only this
 * interface, so a new architecture is one model file plus one entry here.
 *
 * A config is told apart by its fields: Llama-family configs carry `model_type` (llama | qwen2 |
 * qwen3), GPT-2 configs do not (their `model_type: "gpt2"` is dropped by validation).
 */
import {
  countParams as countGptParams,
  type GPTConfig,
  gpt2ConfigJson,
  gpt2ParamShapes,
  InvalidPolicyConfigError,
  initParams as initGptParams,
  type ParamShape,
  type Params,
  validateGPTConfig,
} from './config.js';
import { buildCachedStepGraph } from './decode-graph.js';
import type { Graph, Tensor } from './graph/index.js';
import { buildLlamaCachedStepGraph, llamaHeadWeight, llamaHidden } from './llama.js';
import {
  initLlamaParams,
  type LlamaConfig,
  llamaConfigJson,
  llamaFamilyOf,
  llamaParamShapes,
  validateLlamaConfig,
} from './llama-config.js';
import { gptHeadWeight, gptHidden } from './model.js';
import type { HiddenStates, ModelInputs, ParamTensors, WeightsDtype } from './model-inputs.js';

/**
 * A validated config. `extra` holds the config.json keys the architecture does not interpret
 * (bos/eos/pad ids, `transformers_version`, `use_cache`, `max_window_layers`, ...): they are
 * written back unchanged on save, so a checkpoint trained here keeps what transformers, vLLM and
 * generation read from its base's config.json. Absent when there are none.
 */
export type PolicyConfig = (GPTConfig | LlamaConfig) & { extra?: Record<string, unknown> };

/** Keys save always rewrites: the element type of the weights actually saved. */
const DTYPE_KEYS = ['torch_dtype', 'dtype'];

export const isLlamaConfig = (cfg: PolicyConfig): cfg is LlamaConfig => 'model_type' in cfg;

export interface Architecture {
  /** 'gpt2' or the Llama family. */
  readonly name: string;
  readonly vocabSize: number;
  /** The longest sequence (prompt + generation) the policy runs on. */
  readonly maxPositions: number;
  readonly nLayer: number;
  /** Heads the KV cache holds per layer (the key/value heads under grouped-query attention). */
  readonly kvHeads: number;
  readonly headDim: number;
  /** Parameters in their fixed order: graph inputs, checkpoints, optimizer state. */
  paramShapes(): ParamShape[];
  /** Final hidden states [B, S, D] and each layer's grown cache [B, kvHeads, T, hd]. */
  hidden(p: ParamTensors, inp: ModelInputs): HiddenStates;
  /** LM head weight [V, D]: logits = h @ W^T. */
  headWeight(p: ParamTensors): Tensor;
  /** The one-token decode step over a cache the runtime owns (inputs/outputs as decode-graph.ts). */
  cachedStepGraph(weights?: WeightsDtype): Graph;
  /** The family's usual random initialisation. */
  initParams(seed: number): Params;
  /** config.json as transformers writes it (keys sorted), with the config's `extra` keys. */
  configJson(): Record<string, unknown>;
}

function gpt2(cfg: GPTConfig): Architecture {
  return {
    name: 'gpt2',
    vocabSize: cfg.vocab_size,
    maxPositions: cfg.n_positions,
    nLayer: cfg.n_layer,
    kvHeads: cfg.n_head,
    headDim: cfg.n_embd / cfg.n_head,
    paramShapes: () => gpt2ParamShapes(cfg),
    hidden: (p, inp) => gptHidden(cfg, p, inp),
    headWeight: (p) => gptHeadWeight(p),
    cachedStepGraph: (weights) => buildCachedStepGraph(cfg, weights),
    initParams: (seed) => initGptParams(cfg, seed),
    configJson: () => gpt2ConfigJson(cfg),
  };
}

function llama(cfg: LlamaConfig): Architecture {
  return {
    name: cfg.model_type,
    vocabSize: cfg.vocab_size,
    maxPositions: cfg.max_position_embeddings,
    nLayer: cfg.num_hidden_layers,
    kvHeads: cfg.num_key_value_heads,
    headDim: cfg.head_dim,
    paramShapes: () => llamaParamShapes(cfg),
    hidden: (p, inp) => llamaHidden(cfg, p, inp),
    headWeight: (p) => llamaHeadWeight(cfg, p),
    cachedStepGraph: (weights) => buildLlamaCachedStepGraph(cfg, weights),
    initParams: (seed) => initLlamaParams(cfg, seed),
    configJson: () => llamaConfigJson(cfg),
  };
}

export function architecture(cfg: PolicyConfig): Architecture {
  const arch = isLlamaConfig(cfg) ? llama(cfg) : gpt2(cfg);
  const known = arch.configJson;
  // Sorted as transformers' `to_json_string` writes; the interpreted keys win over `extra`.
  arch.configJson = () => Object.fromEntries(Object.entries({ ...cfg.extra, ...known() }).sort(byKey));
  return arch;
}

const byKey = (a: [string, unknown], b: [string, unknown]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

/** Total parameter count (a tied LM head counted once). */
export function countParams(cfg: PolicyConfig): number {
  if (!isLlamaConfig(cfg)) return countGptParams(cfg);
  return llamaParamShapes(cfg).reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1), 0);
}

/**
 * Reads a parsed config.json of any supported architecture: Llama / Qwen2 / Qwen3 (by
 * `model_type` or `architectures`) or GPT-2. Throws an error naming the file and the bad key.
 */
export function parsePolicyConfig(json: unknown, file?: string): PolicyConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new InvalidPolicyConfigError('(root)', 'must be a JSON object', file);
  }
  const o = json as Record<string, unknown>;
  const cfg: PolicyConfig = llamaFamilyOf(o) ? validateLlamaConfig(o, file) : parseGpt2(o, file);
  const written = new Set([...Object.keys(architecture(cfg).configJson()), ...DTYPE_KEYS]);
  const extra = Object.entries(o).filter(([k]) => !written.has(k));
  return extra.length > 0 ? { ...cfg, extra: Object.fromEntries(extra) } : cfg;
}

function parseGpt2(o: Record<string, unknown>, file?: string): GPTConfig {
  const mt = o.model_type;
  if (typeof mt === 'string' && mt !== 'gpt2') {
    throw new InvalidPolicyConfigError(
      'model_type',
      `'${mt}' is not supported (supported: gpt2, llama, qwen2, qwen3)`,
      file,
    );
  }
  return validateGPTConfig(o, file);
}
