/**
 * `akbe policy ...`: create, inspect and run a policy from a checkpoint directory (config.json +
 * model.safetensors or shards, the Hugging Face layout of GPT-2, Llama, Qwen2 or Qwen3). ORT and
 * the graphs are imported lazily so `akbe --help` stays fast.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type CommandContext,
  type CommandSpec,
  choiceFlag,
  intFlag,
  numberFlag,
  requireString,
  UsageError,
} from '../command.js';
import { WEIGHTS_DTYPE_FLAG, weightsDtypeFlag } from '../common-flags.js';

const DEVICE_FLAG = {
  device: {
    type: 'string',
    value: 'D',
    description: 'cpu | webgpu | cuda | auto (auto tries cuda, webgpu, cpu)',
    default: 'cpu',
  },
  threads: {
    type: 'string',
    value: 'N',
    description: 'ORT intra-op threads (0 = one per core)',
    default: '0',
  },
  ...WEIGHTS_DTYPE_FLAG,
} as const;

async function runtimeFor(ctx: CommandContext) {
  const { DEVICE_CHOICES } = await import('../../gpu/session.js');
  const device = choiceFlag(ctx, 'device', DEVICE_CHOICES, 'cpu')!;
  const intraOpThreads = intFlag(ctx, 'threads', { min: 0, max: 256, fallback: 0 })!;
  const dir = requireString(ctx, 'checkpoint');
  const { PolicyRuntime } = await import('../../gpu/policy-runtime.js');
  return PolicyRuntime.fromCheckpoint(dir, {
    device,
    intraOpThreads,
    weights: await weightsDtypeFlag(ctx, dir),
    log: (line) => ctx.err.write(`${line}\n`),
  });
}

async function readJsonFile(path: string, flag: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new Error(
      `--${flag} ${path}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`--${flag} ${path}: bad JSON (${(e as Error).message})`);
  }
}

const init: CommandSpec = {
  path: ['policy', 'init'],
  summary:
    "Create a randomly initialised policy checkpoint (the family's init) from a GPT-2, Llama, Qwen2 or Qwen3 config.json",
  flags: {
    config: {
      type: 'string',
      value: 'FILE',
      description:
        'Hugging Face config.json: GPT2LMHeadModel (vocab_size, n_embd, n_layer, n_head, n_positions) or LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM',
    },
    out: { type: 'string', value: 'DIR', description: 'checkpoint directory to write' },
    seed: { type: 'string', value: 'N', description: 'initialisation seed', default: '0' },
    dtype: {
      type: 'string',
      value: 'T',
      description: 'saved element type: F32 | BF16 | F16',
      default: 'F32',
    },
    'shard-mb': {
      type: 'string',
      value: 'N',
      description: 'shard the weights into files of at most N MB (model.safetensors.index.json)',
    },
    force: { type: 'boolean', description: 'overwrite an existing checkpoint in DIR' },
  },
  async run(ctx) {
    const configPath = requireString(ctx, 'config');
    const out = requireString(ctx, 'out');
    const seed = intFlag(ctx, 'seed', { min: 0, max: 0xffffffff, fallback: 0 })!;
    const { SAVE_DTYPES } = await import('../../gpu/hf-weights.js');
    const dtype = choiceFlag(ctx, 'dtype', SAVE_DTYPES, 'F32')!;
    const shardMb = intFlag(ctx, 'shard-mb', { min: 1 });
    const { parsePolicyConfig, architecture, countParams } = await import('../../gpu/architecture.js');
    const { saveCheckpoint, CONFIG_FILE } = await import('../../gpu/checkpoint.js');
    const cfg = parsePolicyConfig(await readJsonFile(configPath, 'config'), configPath);
    if (existsSync(join(out, CONFIG_FILE)) && ctx.flags.force !== true) {
      throw new Error(`--out ${out} already holds a checkpoint; pass --force to overwrite it`);
    }
    await saveCheckpoint(
      out,
      {
        config: cfg,
        params: architecture(cfg).initParams(seed),
        metadata: { akbe_init_seed: String(seed) },
      },
      { dtype, maxShardBytes: shardMb ? shardMb * 1e6 : undefined },
    );
    ctx.out.write(
      `wrote ${out} (${countParams(cfg)} parameters, seed ${seed}): ${architecture(cfg).name}, ${dtype}
`,
    );
  },
};

const logprobs: CommandSpec = {
  path: ['policy', 'logprobs'],
  summary: 'Score token sequences: log p(x_t | x_<t) for t = 1..L-1 of each sequence, as JSON',
  flags: {
    checkpoint: { type: 'string', value: 'DIR', description: 'policy checkpoint directory' },
    input: {
      type: 'string',
      value: 'FILE',
      description: 'JSON {"sequences": [[id, ...], ...]} (lengths may differ)',
    },
    ...DEVICE_FLAG,
  },
  async run(ctx) {
    const input = requireString(ctx, 'input');
    const json = (await readJsonFile(input, 'input')) as { sequences?: unknown };
    const seqs = json?.sequences;
    if (!Array.isArray(seqs) || !seqs.every((s) => Array.isArray(s) && s.every((x) => Number.isInteger(x)))) {
      throw new Error(`--input ${input}: expected {"sequences": [[id, ...], ...]} with integer token ids`);
    }
    await using runtime = await runtimeFor(ctx);
    const result = await runtime.logprobs(seqs as number[][]);
    ctx.out.write(`${JSON.stringify({ logprobs: result })}\n`);
  },
};

const sample: CommandSpec = {
  path: ['policy', 'sample'],
  summary:
    'Sample a continuation of a token prompt; prints JSON {tokens, logprobs, policyLogprobs, finishReason}',
  flags: {
    checkpoint: { type: 'string', value: 'DIR', description: 'policy checkpoint directory' },
    tokens: { type: 'string', value: 'IDS', description: 'prompt token ids, comma-separated (e.g. 1,2,3)' },
    'max-new': { type: 'string', value: 'N', description: 'most tokens to generate', default: '20' },
    temperature: {
      type: 'string',
      value: 'T',
      description: 'sampling temperature (0 = greedy)',
      default: '1',
    },
    'top-p': { type: 'string', value: 'P', description: 'nucleus mass in (0, 1]', default: '1' },
    seed: { type: 'string', value: 'N', description: 'sampling seed', default: '0' },
    'stop-tokens': {
      type: 'string',
      value: 'IDS',
      description: 'token ids that end generation, comma-separated',
    },
    ...DEVICE_FLAG,
  },
  async run(ctx) {
    const prompt = idList(ctx, 'tokens', true);
    const stopTokens = idList(ctx, 'stop-tokens', false);
    const req = {
      prompt,
      maxNewTokens: intFlag(ctx, 'max-new', { min: 1, fallback: 20 })!,
      temperature: numberFlag(ctx, 'temperature', { min: 0, fallback: 1 })!,
      topP: numberFlag(ctx, 'top-p', { min: Number.MIN_VALUE, max: 1, fallback: 1 })!,
      seed: intFlag(ctx, 'seed', { min: 0, max: 0xffffffff, fallback: 0 })!,
      stopTokens,
    };
    await using runtime = await runtimeFor(ctx);
    const r = await runtime.generate(req);
    ctx.out.write(`${JSON.stringify(r)}\n`);
  },
};

const info: CommandSpec = {
  path: ['policy', 'info'],
  summary:
    "Show a checkpoint: config, parameter count, memory (weights, gradients, AdamW, KV cache, a training step's peak), device, and how many graph nodes each ORT provider runs",
  flags: {
    checkpoint: { type: 'string', value: 'DIR', description: 'policy checkpoint directory' },
    batch: { type: 'string', value: 'B', description: 'batch size of the KV-cache figure', default: '1' },
    context: {
      type: 'string',
      value: 'T',
      description: "tokens per sequence of the KV-cache figure (default: the policy's context)",
    },
    ...DEVICE_FLAG,
  },
  async run(ctx) {
    const batch = intFlag(ctx, 'batch', { min: 1, fallback: 1 })!;
    const contextFlag = intFlag(ctx, 'context', { min: 1 });
    await using runtime = await runtimeFor(ctx);
    const { architecture } = await import('../../gpu/architecture.js');
    const { memoryEstimate, formatBytes, trainStepPeak } = await import('../../gpu/memory.js');
    const context = contextFlag ?? architecture(runtime.config).maxPositions;
    const mem = memoryEstimate(runtime.config, { batch, context });
    const weights = await weightsDtypeFlag(ctx, requireString(ctx, 'checkpoint'));
    const fed = memoryEstimate(runtime.config, { batch, context, bytes: weights === 'float32' ? 4 : 2 });
    const i = await runtime.info();
    const train = trainStepPeak(runtime.config, { batch, seq: context });
    const lines = [
      `checkpoint: ${ctx.flags.checkpoint}`,
      `architecture: ${architecture(i.config).name}`,
      `config: ${JSON.stringify(i.config)}`,
      `parameters: ${i.parameters}`,
      `memory (float32): weights ${formatBytes(mem.weights)}, gradients ${formatBytes(mem.gradients)}, AdamW state ${formatBytes(mem.adamw)}, KV cache ${formatBytes(mem.kvCache)} (batch ${batch} x context ${context}; ${formatBytes(mem.kvCachePerToken)} per token)`,
      `training step peak (CPU, float32, optimizer 'host', batch ${batch} x ${context}): ~${formatBytes(train.peak)} resident (head in chunks of ${train.chunk} positions; src/gpu/memory.ts trainStepPeak, within 20% of bench/train-memory.ts)`,
      `inference weights (${weights}, --weights-dtype): ${formatBytes(fed.weights)} fed to the decode and scoring graphs, widened to float32 where used`,
      `device: ${i.device}`,
      `session creation: decode ${i.createMs.decode.toFixed(0)} ms, score ${i.createMs.score.toFixed(0)} ms`,
      ...Object.entries(i.nodesPerProvider).map(
        ([graph, per]) =>
          `nodes per provider (${graph} graph): ${Object.entries(per)
            .map(([p, n]) => `${p} ${n}`)
            .join(', ')}`,
      ),
    ];
    ctx.out.write(`${lines.join('\n')}\n`);
  },
};

function idList(ctx: CommandContext, flag: string, required: boolean): number[] {
  const v = ctx.flags[flag];
  if (v === undefined || v === '') {
    if (required) throw new UsageError(`missing required flag --${flag}`);
    return [];
  }
  const parts = String(v)
    .split(',')
    .map((s) => s.trim());
  if (!parts.every((p) => /^\d+$/.test(p)))
    throw new UsageError(`--${flag} must be comma-separated token ids, got '${v}'`);
  return parts.map(Number);
}

export const policyCommands: CommandSpec[] = [init, logprobs, sample, info];
