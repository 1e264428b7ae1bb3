/**
 * Flags and flag checks that several commands share, defined once so that their --help text and
 * their usage errors read the same in every command.
 */

import { RUN_ID_PATTERN } from '../events/catalog.js';
import { type CommandContext, choiceFlag, optionalString, requireString, UsageError } from './command.js';

/** `--home DIR`: where akbe keeps its data (the world, the base policy, a recorded nats-server). */
export const HOME_FLAG = {
  type: 'string',
  value: 'DIR',
  description: 'project data dir (default: AKBE_HOME or ./.akbe)',
} as const;

/** `--allow-host NAME`: more Host values an HTTP server accepts (src/util/http-guard.ts). */
export const ALLOW_HOST_FLAG = {
  type: 'string',
  value: 'NAME',
  multiple: true,
  description: 'also accept this Host header (NAME or NAME:PORT; default: localhost, IP literals, --host)',
} as const;

/**
 * `--nats-ca FILE`, `--nats-insecure`: which NATS servers a command believes (nats-trust.ts).
 * main.ts hands them to every connection (and to child processes) as AKBE_NATS_TLS_CA and
 * AKBE_NATS_INSECURE.
 */
export const NATS_TRUST_FLAGS = {
  'nats-ca': {
    type: 'string',
    value: 'FILE',
    description:
      "believe NATS servers with a certificate from this CA (default: AKBE_NATS_TLS_CA, else the home's)",
  },
  'nats-insecure': {
    type: 'boolean',
    description:
      'connect to a plain NATS server without TLS: any server on the URL is believed (warned, recorded)',
  },
} as const;

/** `--nats URL --home DIR` and the trust flags: how a command finds (or starts) its NATS server. */
export const CONNECTION_FLAGS = {
  nats: {
    type: 'string',
    value: 'URL',
    description: 'NATS server (default: NATS_URL, then akbe nats up, then an embedded server)',
  },
  home: HOME_FLAG,
  ...NATS_TRUST_FLAGS,
} as const;

/**
 * The trust flags as the environment every connection of this command reads (and its children
 * inherit); returns the function that puts the environment back (main() may run in a test).
 */
export function applyNatsTrustFlags(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv = process.env,
): () => void {
  const before = { ca: env.AKBE_NATS_TLS_CA, insecure: env.AKBE_NATS_INSECURE };
  if (typeof flags['nats-ca'] === 'string') env.AKBE_NATS_TLS_CA = flags['nats-ca'];
  if (flags['nats-insecure'] === true) env.AKBE_NATS_INSECURE = '1';
  const put = (k: string, v: string | undefined) => {
    if (v === undefined) delete env[k];
    else env[k] = v;
  };
  return () => {
    put('AKBE_NATS_TLS_CA', before.ca);
    put('AKBE_NATS_INSECURE', before.insecure);
  };
}

/**
 * Checks a run id against the event catalog's pattern; a bad one is a usage error naming `flag`,
 * raised before any connection is made (exit 2).
 */
export async function checkRunId(flag: string, runId: string): Promise<string> {
  if (!RUN_ID_PATTERN.test(runId))
    throw new UsageError(`--${flag} must be 1-64 characters from [A-Za-z0-9_-], got '${runId}'`);
  return runId;
}

/** Reads the required `--run ID` flag and validates it (a usage error, exit 2, when bad). */
export async function runFlag(ctx: CommandContext): Promise<string> {
  return checkRunId('run', requireString(ctx, 'run'));
}

/** `--engine URL` and its companions: the policy role answers svc.generate from that engine. */
export const ENGINE_FLAGS = {
  engine: {
    type: 'string',
    value: 'URL',
    description:
      'policy role: answer svc.generate from an OpenAI-compatible engine (vLLM, SGLang, akbe policy serve), e.g. http://127.0.0.1:8000/v1',
  },
  'engine-sync': {
    type: 'string',
    value: 'S',
    description:
      'disk (POST /update_weights_from_disk with each published checkpoint) | none (a frozen engine)',
    default: 'disk',
  },
  'engine-key-file': {
    type: 'string',
    value: 'PATH',
    description:
      'the engine API key, read from PATH (yours, mode 0600 or stricter; default: $AKBE_ENGINE_KEY)',
  },
  'engine-key': {
    type: 'string',
    value: 'KEY',
    description: 'refused: a key on the command line is visible in ps to every user (use --engine-key-file)',
  },
  'engine-model': {
    type: 'string',
    value: 'NAME',
    description: 'the model id to request (default: the first listed)',
  },
} as const;

/** Where a command's secret may come from: a 0600 file flag or an env var, never the command line. */
export interface SecretFlags {
  /** The flag naming a file that holds the secret (e.g. 'api-key-file'). */
  file: string;
  /** The flag that would put the secret in `ps` (e.g. 'api-key'): refused when given. */
  refused: string;
  /** The environment variable read when the file flag is absent. */
  env: string;
}

/**
 * The secret from `--<file>` (the user's own file, mode 0600 or stricter) or `$<env>`; `--<refused>
 * KEY` is a usage error, since every local user can read a process's arguments (`ps`).
 */
export async function secretFromFlags(ctx: CommandContext, names: SecretFlags): Promise<string | undefined> {
  if (ctx.flags[names.refused] !== undefined)
    throw new UsageError(
      `--${names.refused} puts the key in \`ps\` for every user: use --${names.file} PATH (mode 0600) or ${names.env}`,
    );
  const file = optionalString(ctx, names.file);
  if (file === undefined) return process.env[names.env] || undefined;
  const { readSecretFile, SecretFileError } = await import('../util/secret-file.js');
  try {
    return await readSecretFile(file);
  } catch (err) {
    if (err instanceof SecretFileError) throw new UsageError(`--${names.file}: ${err.message}`);
    throw err;
  }
}

/** The ENGINE_FLAGS given, or undefined when no engine is named (a companion alone is an error). */
export async function engineOptions(ctx: CommandContext) {
  const url = optionalString(ctx, 'engine');
  const sync = choiceFlag(ctx, 'engine-sync', ['disk', 'none'] as const, 'disk');
  if (!url) {
    const lone = (['engine-key', 'engine-key-file', 'engine-model'] as const).find(
      (f) => ctx.flags[f] !== undefined,
    );
    if (lone || sync !== 'disk') throw new UsageError(`--${lone ?? 'engine-sync'} needs --engine URL`);
    return undefined;
  }
  if (!/^https?:\/\//.test(url)) throw new UsageError(`--engine must be an http(s) URL, got '${url}'`);
  return {
    url,
    sync,
    apiKey: await secretFromFlags(ctx, {
      file: 'engine-key-file',
      refused: 'engine-key',
      env: 'AKBE_ENGINE_KEY',
    }),
    model: optionalString(ctx, 'engine-model'),
  };
}

/** `--weights-dtype`: how the decode and scoring graphs take the weights (src/gpu/model-inputs.ts). */
export const WEIGHTS_DTYPE_FLAG = {
  'weights-dtype': {
    type: 'string',
    value: 'T',
    description:
      "float32 | float16 | bfloat16 | keep (the checkpoint's torch_dtype): weights fed to inference in 16 bits are widened to float32 in the graph (half the weight memory; compute stays float32)",
    default: 'float32',
  },
} as const;

/** The `--weights-dtype` of a command on checkpoint `dir` (`keep` read from its config.json). */
export async function weightsDtypeFlag(ctx: CommandContext, dir: string) {
  const { WEIGHTS_DTYPES } = await import('../gpu/model-inputs.js');
  const choice = choiceFlag(ctx, 'weights-dtype', [...WEIGHTS_DTYPES, 'keep'] as const, 'float32')!;
  if (choice !== 'keep') return choice;
  const { storedWeightsDtype } = await import('../gpu/checkpoint.js');
  return storedWeightsDtype(dir);
}
