/**
 * Policy checkpoints in the Hugging Face layout of their architecture, so a policy trained here
 * loads in PyTorch tooling and vLLM (`from_pretrained(dir)`, `vllm serve dir`) and the other way
 * round:
 *
 *   dir/config.json            the architecture's config (GPT2Config, LlamaConfig, Qwen2Config,
 *                              Qwen3Config fields; `torch_dtype` = the saved element type)
 *   dir/model.safetensors      the parameters under their transformers names (GPT-2 with the
 *                              `transformer.` prefix, Conv1D layout; Llama family `model.*` and
 *                              `lm_head.weight`, nn.Linear layout) in F32, BF16 or F16, or shards
 *                              with model.safetensors.index.json (hf-weights.ts)
 *   dir/optimizer.safetensors  optional AdamW moments `m.<name>`, `v.<name>` (F32); step in metadata
 *
 * Loading accepts F32, BF16, F16 and F64 tensors (widened to float32, what the CPU computes in),
 * GPT-2 names with or without `transformer.`, and a tied head's `lm_head.weight` when it equals
 * the embedding (what `save_pretrained` writes when it does not drop tied weights).
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { architecture, isLlamaConfig, type PolicyConfig, parsePolicyConfig } from './architecture.js';
import type { Params } from './config.js';
import {
  CheckpointError,
  decodeOrFail,
  readOrFail,
  readWeights,
  type SaveDtype,
  TORCH_DTYPE,
  writeFileAtomic,
  writeWeights,
} from './hf-weights.js';
import type { WeightsDtype } from './model-inputs.js';
import { encodeSafetensors, type SafetensorsTensor, toFloat32 } from './safetensors.js';

export { CheckpointError, MODEL_FILE, writeFileAtomic } from './hf-weights.js';

export const CONFIG_FILE = 'config.json';
export const OPTIMIZER_FILE = 'optimizer.safetensors';

/** AdamW state that survives a checkpoint: first and second moments per parameter, and the step. */
export interface OptimizerState {
  step: number;
  m: Params;
  v: Params;
}

export interface Checkpoint {
  config: PolicyConfig;
  params: Params;
  optimizer?: OptimizerState;
  /** `__metadata__` of model.safetensors (format: 'pt' plus anything the writer added). */
  metadata?: Record<string, string>;
}

export interface SaveOptions {
  /** Element type of the saved parameters (default F32; the optimizer state is always F32). */
  dtype?: SaveDtype;
  /** Shard the weights into files of at most this many bytes (default: one model.safetensors). */
  maxShardBytes?: number;
}

/** How an architecture's parameter names appear in its transformers checkpoint. */
function naming(cfg: PolicyConfig) {
  if (isLlamaConfig(cfg)) {
    return {
      savePrefix: '',
      loadPrefixes: [''],
      tiedHead: cfg.tie_word_embeddings ? 'model.embed_tokens.weight' : undefined,
      // Buffers older transformers versions saved; not parameters.
      ignore: (key: string) => key.endsWith('.rotary_emb.inv_freq'),
    };
  }
  return {
    savePrefix: 'transformer.',
    loadPrefixes: ['transformer.', ''],
    tiedHead: 'wte.weight',
    ignore: (key: string) => key.endsWith('.attn.bias') || key.endsWith('.attn.masked_bias'),
  };
}

/** Saves config, parameters and (optionally) optimizer state into `dir` (created if needed). */
export async function saveCheckpoint(dir: string, ckpt: Checkpoint, opts: SaveOptions = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  const arch = architecture(ckpt.config);
  const shapes = arch.paramShapes();
  const tensorsOf = (params: Params, prefix: string, file: string) =>
    shapes.map(({ name, shape }): [string, { shape: number[]; data: Float32Array }] => {
      const data = params.get(name);
      if (!data) throw new CheckpointError(join(dir, file), `cannot save: parameter ${name} is missing`);
      if (data.length !== shape.reduce((a, b) => a * b, 1)) {
        throw new CheckpointError(
          join(dir, file),
          `cannot save: parameter ${name} has ${data.length} values, shape [${shape}] needs ${shape.reduce((a, b) => a * b, 1)}`,
        );
      }
      return [prefix + name, { shape, data }];
    });
  const dtype = opts.dtype ?? 'F32';
  await writeWeights(dir, tensorsOf(ckpt.params, naming(ckpt.config).savePrefix, 'model.safetensors'), {
    dtype,
    maxShardBytes: opts.maxShardBytes,
    metadata: ckpt.metadata,
  });
  if (ckpt.optimizer) {
    const opt = ckpt.optimizer;
    const tensors = [...tensorsOf(opt.m, 'm.', OPTIMIZER_FILE), ...tensorsOf(opt.v, 'v.', OPTIMIZER_FILE)];
    await writeFileAtomic(
      join(dir, OPTIMIZER_FILE),
      encodeSafetensors(tensors, { format: 'akbe-adamw', step: String(opt.step) }),
    );
  }
  // config.json last: a directory with a config always has the weights that go with it.
  const json = { ...arch.configJson(), torch_dtype: TORCH_DTYPE[dtype] };
  await writeFileAtomic(join(dir, CONFIG_FILE), `${JSON.stringify(json, null, 2)}\n`);
}

/** Reads and validates config.json of a checkpoint directory. */
export async function loadCheckpointConfig(dir: string): Promise<PolicyConfig> {
  const path = join(dir, CONFIG_FILE);
  const text = (
    await readOrFail(path, 'a checkpoint directory needs config.json; create one with `akbe policy init`')
  ).toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(path, `bad JSON (${(e as Error).message})`, { cause: e });
  }
  try {
    return parsePolicyConfig(json, path);
  } catch (e) {
    throw new CheckpointError(path, (e as Error).message.replace(`${path}: `, ''), { cause: e });
  }
}

/**
 * Picks the parameters of `cfg` out of decoded tensors: each under one of `prefixes`, floating
 * point (widened to float32) with the expected shape.
 */
function extractParams(
  tensors: Map<string, SafetensorsTensor>,
  cfg: PolicyConfig,
  fileOf: (key: string) => string,
  prefixes: string[],
): { params: Params; used: Set<string> } {
  const params: Params = new Map();
  const used = new Set<string>();
  for (const { name, shape } of architecture(cfg).paramShapes()) {
    const key = prefixes.map((p) => p + name).find((k) => tensors.has(k));
    if (key === undefined)
      throw new CheckpointError(
        fileOf(name),
        `missing key ${prefixes[0]}${name} (shape [${shape.join(', ')}])`,
      );
    const t = tensors.get(key)!;
    if (!['F32', 'BF16', 'F16', 'F64'].includes(t.dtype))
      throw new CheckpointError(
        fileOf(key),
        `key ${key} has dtype ${t.dtype}; parameters must be F32, BF16, F16 or F64`,
      );
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new CheckpointError(
        fileOf(key),
        `wrong shape for key ${key}: [${t.shape.join(', ')}], config.json says [${shape.join(', ')}]`,
      );
    }
    params.set(name, toFloat32(t));
    used.add(key);
  }
  return { params, used };
}

/**
 * Loads a checkpoint directory: config.json, the weights (single file or shards) and, if
 * present, optimizer.safetensors.
 */
export async function loadCheckpoint(dir: string, opts: { optimizer?: boolean } = {}): Promise<Checkpoint> {
  const config = await loadCheckpointConfig(dir);
  const names = naming(config);
  const weights = await readWeights(dir);
  const { params, used } = extractParams(weights.tensors, config, weights.fileOf, names.loadPrefixes);
  for (const [key, t] of weights.tensors) {
    if (used.has(key) || names.ignore(key)) continue;
    if (key === 'lm_head.weight' && names.tiedHead) {
      const lm = toFloat32(t);
      const emb = params.get(names.tiedHead)!;
      if (lm.length !== emb.length || lm.some((x, i) => x !== emb[i])) {
        throw new CheckpointError(
          weights.fileOf(key),
          `lm_head.weight differs from ${names.tiedHead}, but config.json ties them (tie_word_embeddings); set it to false to load an untied head`,
        );
      }
      continue;
    }
    throw new CheckpointError(
      weights.fileOf(key),
      `unexpected key ${key} (not a parameter of the ${architecture(config).name} config in ${CONFIG_FILE})`,
    );
  }
  const ckpt: Checkpoint = { config, params, metadata: weights.metadata };
  if (opts.optimizer !== false) ckpt.optimizer = await loadOptimizer(dir, config);
  return ckpt;
}

async function loadOptimizer(dir: string, config: PolicyConfig): Promise<OptimizerState | undefined> {
  const path = join(dir, OPTIMIZER_FILE);
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined; // optional
    throw new CheckpointError(path, `cannot be read (${(e as Error).message})`, { cause: e });
  }
  const file = decodeOrFail(bytes, path);
  const step = Number(file.metadata.step);
  if (!Number.isSafeInteger(step) || step < 0)
    throw new CheckpointError(
      path,
      `__metadata__.step must be a non-negative integer, got ${JSON.stringify(file.metadata.step)}`,
    );
  return {
    step,
    m: extractParams(file.tensors, config, () => path, ['m.']).params,
    v: extractParams(file.tensors, config, () => path, ['v.']).params,
  };
}

/** The context (longest prompt + generation) and vocabulary size of the policy in `dir`, from its config.json. */
export async function checkpointLimits(dir: string): Promise<{ context: number; vocabSize: number }> {
  const arch = architecture(await loadCheckpointConfig(dir));
  return { context: arch.maxPositions, vocabSize: arch.vocabSize };
}

/**
 * The 16-bit element type a checkpoint's config.json says its weights are stored in (`torch_dtype`,
 * or newer transformers' `dtype`): what `--weights-dtype keep` keeps in the inference graphs.
 */
export async function storedWeightsDtype(dir: string): Promise<WeightsDtype> {
  const path = join(dir, CONFIG_FILE);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse((await readOrFail(path, 'a checkpoint directory needs config.json')).toString('utf8'));
  } catch (e) {
    if (e instanceof CheckpointError) throw e;
    throw new CheckpointError(path, `bad JSON (${(e as Error).message})`, { cause: e });
  }
  const stored = json.torch_dtype ?? json.dtype;
  return stored === 'bfloat16' || stored === 'float16' ? stored : 'float32';
}
