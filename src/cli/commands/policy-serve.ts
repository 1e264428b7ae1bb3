/**
 * `akbe policy serve --checkpoint DIR --http PORT`: the policy behind an OpenAI-compatible
 * completions API (src/serve), for any OpenAI/vLLM client and for `akbe worker --engine URL`.
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import {
  type CommandSpec,
  choiceFlag,
  intFlag,
  optionalString,
  requireString,
  UsageError,
} from '../command.js';
import { ALLOW_HOST_FLAG, secretFromFlags, WEIGHTS_DTYPE_FLAG, weightsDtypeFlag } from '../common-flags.js';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

const serve: CommandSpec = {
  path: ['policy', 'serve'],
  summary:
    'Serve a policy checkpoint over the OpenAI-compatible completions API (token ids and logprobs too)',
  flags: {
    checkpoint: {
      type: 'string',
      value: 'DIR',
      description: 'policy checkpoint directory (config.json, weights, tokenizer)',
    },
    http: { type: 'string', value: 'PORT', description: 'port to listen on (0 = any free port)' },
    host: { type: 'string', value: 'ADDR', description: 'address to bind', default: '127.0.0.1' },
    tokenizer: { type: 'string', value: 'DIR', description: 'tokenizer directory (default: the checkpoint)' },
    model: {
      type: 'string',
      value: 'NAME',
      description: 'model id clients send (default: the directory name)',
    },
    'api-key-file': {
      type: 'string',
      value: 'PATH',
      description:
        'require Authorization: Bearer <the key in PATH> (PATH yours, mode 0600 or stricter; default: $AKBE_API_KEY, else none)',
    },
    'api-key': {
      type: 'string',
      value: 'KEY',
      description: 'refused: a key on the command line is visible in ps to every user (use --api-key-file)',
    },
    'allow-host': ALLOW_HOST_FLAG,
    'allow-weight-updates': {
      type: 'boolean',
      description: 'enable POST /update_weights_from_disk {"model_path": DIR} (weight sync from a trainer)',
    },
    device: { type: 'string', value: 'D', description: 'cpu | webgpu | cuda | auto', default: 'cpu' },
    threads: {
      type: 'string',
      value: 'N',
      description: 'ORT intra-op threads (0 = one per core)',
      default: '0',
    },
    ...WEIGHTS_DTYPE_FLAG,
  },
  async run(ctx) {
    const checkpoint = requireString(ctx, 'checkpoint');
    const port = intFlag(ctx, 'http', { min: 0, max: 65535 });
    if (port === undefined) throw new UsageError('missing required flag --http PORT');
    const host = optionalString(ctx, 'host') ?? '127.0.0.1';
    const { DEVICE_CHOICES } = await import('../../gpu/session.js');
    const { serveCheckpoint } = await import('../../serve/policy-server.js');
    const apiKey = await secretFromFlags(ctx, {
      file: 'api-key-file',
      refused: 'api-key',
      env: 'AKBE_API_KEY',
    });
    if (!LOOPBACK.has(host) && !apiKey)
      ctx.err.write(
        `warning: --host ${host} exposes the policy beyond this machine with no --api-key-file\n`,
      );
    const served = await serveCheckpoint({
      checkpoint,
      port,
      host,
      tokenizerDir: optionalString(ctx, 'tokenizer'),
      modelName: optionalString(ctx, 'model'),
      apiKey,
      allowHosts: ctx.flags['allow-host'] as string[] | undefined,
      allowWeightUpdates: ctx.flags['allow-weight-updates'] === true,
      device: choiceFlag(ctx, 'device', DEVICE_CHOICES, 'cpu'),
      threads: intFlag(ctx, 'threads', { min: 0, max: 256, fallback: 0 }),
      weights: await weightsDtypeFlag(ctx, checkpoint),
      log: (line) => ctx.err.write(`${line}\n`),
    });
    try {
      ctx.out.write(
        `serving ${checkpoint} at ${served.server.url}/v1 (POST /v1/completions); Ctrl-C stops\n`,
      );
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
    } finally {
      await served.close();
    }
  },
};

export const policyServeCommands: CommandSpec[] = [serve];
