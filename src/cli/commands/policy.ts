/**
 * `akbe policy ...`: create, inspect and run the embedded GPT policy from a checkpoint directory
 * (config.json + model.safetensors, Hugging Face GPT-2 layout). ORT and the graphs are imported
 * lazily so `akbe --help` stays fast.
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
  summary: 'Create a randomly initialised policy checkpoint (GPT-2 init) from a config.json',
  flags: {
    config: {
      type: 'string',
      value: 'FILE',
      description: 'JSON with Hugging Face GPT-2 fields: vocab_size, n_embd, n_layer, n_head, n_positions',
    },
    out: { type: 'string', value: 'DIR', description: 'checkpoint directory to write' },
    seed: { type: 'string', value: 'N', description: 'initialisation seed', default: '0' },
    force: { type: 'boolean', description: 'overwrite an existing checkpoint in DIR' },
  },
  async run(ctx) {
    const configPath = requireString(ctx, 'config');
    const out = requireString(ctx, 'out');
    const seed = intFlag(ctx, 'seed', { min: 0, max: 0xffffffff, fallback: 0 })!;
    const { validateGPTConfig, initParams, countParams } = await import('../../gpu/config.js');
    const { saveCheckpoint, CONFIG_FILE } = await import('../../gpu/checkpoint.js');
    const cfg = validateGPTConfig(await readJsonFile(configPath, 'config'), configPath);
    if (existsSync(join(out, CONFIG_FILE)) && ctx.flags.force !== true) {
      throw new Error(`--out ${out} already holds a checkpoint; pass --force to overwrite it`);
    }
    await saveCheckpoint(out, {
      config: cfg,
      params: initParams(cfg, seed),
      metadata: { akbe_init_seed: String(seed) },
    });
    ctx.out.write(`wrote ${out} (${countParams(cfg)} parameters, seed ${seed})\n`);
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
    'Show a checkpoint: config, parameter count, device, and how many graph nodes each ORT provider runs',
  flags: {
    checkpoint: { type: 'string', value: 'DIR', description: 'policy checkpoint directory' },
    ...DEVICE_FLAG,
  },
  async run(ctx) {
    await using runtime = await runtimeFor(ctx);
    const i = await runtime.info();
    const lines = [
      `checkpoint: ${ctx.flags.checkpoint}`,
      `config: ${JSON.stringify(i.config)}`,
      `parameters: ${i.parameters}`,
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
