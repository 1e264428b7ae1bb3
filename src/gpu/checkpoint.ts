/**
 * Policy checkpoints in the Hugging Face GPT-2 layout, so a policy trained here loads in PyTorch
 * tooling (`GPT2LMHeadModel.from_pretrained(dir)`) and the other way round:
 *
 *   dir/config.json            GPT2Config fields, architectures ["GPT2LMHeadModel"]
 *   dir/model.safetensors      float32 `transformer.<name>` tensors, Conv1D layout; lm_head omitted
 *                              (tied to wte, `tie_word_embeddings: true`)
 *   dir/optimizer.safetensors  optional AdamW moments `m.<name>`, `v.<name>`; step in metadata
 *
 * Loading accepts tensor names with or without the `transformer.` prefix and an `lm_head.weight`
 * that equals `wte` (what `save_pretrained` writes when it does not drop tied weights). Every write
 * goes to a temporary file in the same directory and is renamed into place, so a crash never
 * leaves a half-written checkpoint file behind.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { type GPTConfig, gpt2ParamShapes, type Params, validateGPTConfig } from './config.js';
import { decodeSafetensors, encodeSafetensors, type SafetensorsFile } from './safetensors.js';

export const CONFIG_FILE = 'config.json';
export const MODEL_FILE = 'model.safetensors';
export const OPTIMIZER_FILE = 'optimizer.safetensors';

/** AdamW state that survives a checkpoint: first and second moments per parameter, and the step. */
export interface OptimizerState {
  step: number;
  m: Params;
  v: Params;
}

export interface Checkpoint {
  config: GPTConfig;
  params: Params;
  optimizer?: OptimizerState;
  /** `__metadata__` of model.safetensors (format: 'pt' plus anything the writer added). */
  metadata?: Record<string, string>;
}

/** A checkpoint file that is missing or unusable; the message names the file and the problem. */
export class CheckpointError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: ${problem}`, options);
    this.name = 'CheckpointError';
  }
}

const PREFIX = 'transformer.';

/** config.json as Hugging Face writes it for GPT-2, with our dropout-free training made explicit. */
export function hfConfigJson(cfg: GPTConfig): Record<string, unknown> {
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

/** Writes `bytes` to `path` atomically: temp file in the same directory, then rename. */
export async function writeFileAtomic(path: string, bytes: Uint8Array | string): Promise<void> {
  const tmp = join(path, '..', `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, bytes, { flush: true });
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

/** Saves config, parameters and (optionally) optimizer state into `dir` (created if needed). */
export async function saveCheckpoint(dir: string, ckpt: Checkpoint): Promise<void> {
  await mkdir(dir, { recursive: true });
  const shapes = gpt2ParamShapes(ckpt.config);
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
  const metadata = { ...ckpt.metadata, format: 'pt' };
  await writeFileAtomic(
    join(dir, MODEL_FILE),
    encodeSafetensors(tensorsOf(ckpt.params, PREFIX, MODEL_FILE), metadata),
  );
  if (ckpt.optimizer) {
    const opt = ckpt.optimizer;
    const tensors = [...tensorsOf(opt.m, 'm.', OPTIMIZER_FILE), ...tensorsOf(opt.v, 'v.', OPTIMIZER_FILE)];
    await writeFileAtomic(
      join(dir, OPTIMIZER_FILE),
      encodeSafetensors(tensors, { format: 'akbe-adamw', step: String(opt.step) }),
    );
  }
  // config.json last: a directory with a config always has the weights that go with it.
  await writeFileAtomic(join(dir, CONFIG_FILE), `${JSON.stringify(hfConfigJson(ckpt.config), null, 2)}\n`);
}

async function readOrFail(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? `missing (${what})` : `cannot be read (${(e as Error).message})`;
    throw new CheckpointError(path, why, { cause: e });
  }
}

function decodeOrFail(bytes: Uint8Array, path: string): SafetensorsFile {
  try {
    return decodeSafetensors(bytes, path);
  } catch (e) {
    throw new CheckpointError(path, (e as Error).message.replace(`${path}: `, ''), { cause: e });
  }
}

/** Reads and validates config.json of a checkpoint directory. */
export async function loadCheckpointConfig(dir: string): Promise<GPTConfig> {
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
    return validateGPTConfig(json, path);
  } catch (e) {
    throw new CheckpointError(path, (e as Error).message.replace(`${path}: `, ''), { cause: e });
  }
}

/**
 * Picks the parameters of `cfg` out of a decoded safetensors file: names with or without `prefix`
 * are accepted, every tensor must be F32 with the expected shape, and nothing else is allowed
 * except a tied `lm_head.weight` equal to wte.
 */
function extractParams(
  file: SafetensorsFile,
  cfg: GPTConfig,
  path: string,
  prefixes: string[],
): { params: Params; used: Set<string> } {
  const params: Params = new Map();
  const used = new Set<string>();
  for (const { name, shape } of gpt2ParamShapes(cfg)) {
    const key = prefixes.map((p) => p + name).find((k) => file.tensors.has(k));
    if (key === undefined)
      throw new CheckpointError(path, `missing key ${prefixes[0]}${name} (shape [${shape.join(', ')}])`);
    const t = file.tensors.get(key)!;
    if (t.dtype !== 'F32')
      throw new CheckpointError(
        path,
        `key ${key} has dtype ${t.dtype}; only F32 is supported (convert with tensor.float())`,
      );
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new CheckpointError(
        path,
        `wrong shape for key ${key}: [${t.shape.join(', ')}], config.json says [${shape.join(', ')}]`,
      );
    }
    params.set(name, t.data as Float32Array);
    used.add(key);
  }
  return { params, used };
}

/** Loads a checkpoint directory: config.json, model.safetensors and, if present, optimizer.safetensors. */
export async function loadCheckpoint(dir: string, opts: { optimizer?: boolean } = {}): Promise<Checkpoint> {
  const config = await loadCheckpointConfig(dir);
  const modelPath = join(dir, MODEL_FILE);
  const file = decodeOrFail(await readOrFail(modelPath, 'the weights file of the checkpoint'), modelPath);
  const { params, used } = extractParams(file, config, modelPath, [PREFIX, '']);
  for (const key of file.tensors.keys()) {
    if (used.has(key) || key.endsWith('.attn.bias') || key.endsWith('.attn.masked_bias')) continue; // old HF buffers
    if (key === 'lm_head.weight') {
      const lm = file.tensors.get(key)!.data;
      const wte = params.get('wte.weight')!;
      if (lm.length !== wte.length || lm.some((x, i) => x !== wte[i])) {
        throw new CheckpointError(
          modelPath,
          'lm_head.weight differs from wte.weight; this policy needs tied embeddings',
        );
      }
      continue;
    }
    throw new CheckpointError(
      modelPath,
      `unexpected key ${key} (not a parameter of the GPT-2 config in ${CONFIG_FILE})`,
    );
  }
  const ckpt: Checkpoint = { config, params, metadata: file.metadata };
  if (opts.optimizer !== false) ckpt.optimizer = await loadOptimizer(dir, config);
  return ckpt;
}

async function loadOptimizer(dir: string, config: GPTConfig): Promise<OptimizerState | undefined> {
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
    m: extractParams(file, config, path, ['m.']).params,
    v: extractParams(file, config, path, ['v.']).params,
  };
}
