/**
 * An `akbe train` config file (YAML or JSON): every key of src/rl/config.ts's TrainConfig, plus the
 * run's inputs: `world` (world dir), `policy` (base checkpoint dir), `topK`, `tools` (registered
 * tool names, default [search]), `index` (an `akbe index build` dir, default the world's),
 * `evalQuestions`, `evalSplits`, `keepCheckpoints`, `plugins` (modules that register algorithms or
 * tools, loaded before the rest is validated; docs/api.md). An unknown key or a bad value is a
 * ConfigFileError naming the file and the key. Also the run spec a new run is started from.
 */
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import YAML from 'yaml';
import {
  DEFAULT_KEEP_CHECKPOINTS,
  keepCheckpointsProblem,
} from '../../actors/checkpoints/keep-checkpoints.js';
import type { EvalSettings, RunSpec } from '../../actors/roles/roles.js';
import { loadPlugins, type PluginRef } from '../../plugins/plugins.js';
import { type TrainConfig, validateTrainConfig } from '../../rl/config.js';
import { toolsNamed } from '../../tools/registry.js';

export class ConfigFileError extends Error {
  constructor(
    readonly file: string,
    readonly key: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`${file}: ${message}`, opts);
    this.name = 'ConfigFileError';
  }
}

export interface JobConfig {
  train: TrainConfig;
  world?: string;
  policy?: string;
  topK: number;
  /** Tools by registered name (default: search). */
  tools?: string[];
  /** A search index built with `akbe index build` (default: the world's, `<world>/index`). */
  index?: string;
  evalQuestions: number;
  evalSplits: EvalSettings['splits'];
  /** Policy versions kept on disk and in the object store (0 = all). */
  keepCheckpoints: number;
  /** Plugins loaded before the config was validated (config `plugins`, then `--plugin`). */
  plugins: PluginRef[];
}

const RUN_KEYS = [
  'world',
  'policy',
  'topK',
  'tools',
  'index',
  'evalQuestions',
  'evalSplits',
  'keepCheckpoints',
  'plugins',
] as const;

/** Parses and validates a config file's text; `file` names it in errors. */
export async function parseJobConfig(
  text: string,
  file: string,
  over: Partial<TrainConfig> = {},
  extraPlugins: readonly string[] = [],
): Promise<JobConfig> {
  const { rest, run } = splitKeys(parseText(text, file));
  // Before the validation: a plugin may register the algorithm or tool the config names.
  const plugins = await configPlugins(run.plugins, file, extraPlugins);
  let train: TrainConfig;
  try {
    train = validateTrainConfig({ ...rest, ...over });
  } catch (err) {
    throw new ConfigFileError(file, (err as { key?: string }).key ?? '', (err as Error).message, {
      cause: err,
    });
  }
  const str = (k: string) => {
    if (run[k] === undefined) return undefined;
    if (typeof run[k] !== 'string' || run[k] === '')
      throw new ConfigFileError(
        file,
        k,
        `config.${k} must be a directory path, got ${JSON.stringify(run[k])}`,
      );
    return resolve(run[k] as string);
  };
  const int = (k: string, min: number, fallback: number) => {
    const v = run[k] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
      throw new ConfigFileError(
        file,
        k,
        `config.${k} must be an integer >= ${min}, got ${JSON.stringify(v)}`,
      );
    return v;
  };
  const splits = evalSplitsOf(run.evalSplits, file);
  const keepCheckpoints = run.keepCheckpoints ?? DEFAULT_KEEP_CHECKPOINTS;
  const keepProblem = keepCheckpointsProblem(keepCheckpoints, train.maxStaleness);
  if (keepProblem) throw new ConfigFileError(file, 'keepCheckpoints', keepProblem);
  const tools = configTools(run.tools, file);
  return {
    train,
    world: str('world'),
    policy: str('policy'),
    topK: int('topK', 1, 3),
    tools,
    index: str('index'),
    evalQuestions: int('evalQuestions', 0, 32),
    evalSplits: splits,
    keepCheckpoints: keepCheckpoints as number,
    plugins,
  };
}

/** The file's settings as a mapping (YAML, or JSON for a .json file); an empty file is {}. */
function parseText(text: string, file: string): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new ConfigFileError(
      file,
      '',
      `not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
      { cause: err },
    );
  }
  raw ??= {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new ConfigFileError(file, '', 'must be a mapping of settings');
  return raw as Record<string, unknown>;
}

/** The run's own keys (RUN_KEYS) apart from the rest, which is the TrainConfig. */
function splitKeys(raw: Record<string, unknown>) {
  const rest: Record<string, unknown> = { ...raw };
  const run: Record<string, unknown> = {};
  for (const k of RUN_KEYS) {
    if (k in rest) run[k] = rest[k];
    delete rest[k];
  }
  return { rest, run };
}

function evalSplitsOf(listed: unknown, file: string): JobConfig['evalSplits'] {
  const splits = listed ?? ['dev'];
  if (!Array.isArray(splits) || !splits.every((s) => s === 'train' || s === 'dev' || s === 'test'))
    throw new ConfigFileError(
      file,
      'evalSplits',
      `config.evalSplits must be a list of train|dev|test, got ${JSON.stringify(splits)}`,
    );
  return splits as JobConfig['evalSplits'];
}

/** config.tools as registered tool names (undefined: the default). */
function configTools(listed: unknown, file: string): string[] | undefined {
  if (listed === undefined) return undefined;
  if (!Array.isArray(listed) || !listed.every((x) => typeof x === 'string'))
    throw new ConfigFileError(
      file,
      'tools',
      `config.tools must be a list of tool names, got ${JSON.stringify(listed)}`,
    );
  try {
    return toolsNamed(listed as string[]).map((t) => t.name);
  } catch (err) {
    throw new ConfigFileError(file, 'tools', `config.tools: ${(err as Error).message}`, { cause: err });
  }
}

/** Loads a config's `plugins` (paths relative to the config file) and then `--plugin`'s (to the cwd). */
async function configPlugins(listed: unknown, file: string, extra: readonly string[]): Promise<PluginRef[]> {
  if (
    listed !== undefined &&
    (!Array.isArray(listed) || !listed.every((x) => typeof x === 'string' && x !== ''))
  )
    throw new ConfigFileError(
      file,
      'plugins',
      `config.plugins must be a list of module paths, got ${JSON.stringify(listed)}`,
    );
  try {
    return [
      ...(await loadPlugins((listed as string[] | undefined) ?? [], dirname(resolve(file)))),
      ...(await loadPlugins(extra, process.cwd())),
    ];
  } catch (err) {
    throw new ConfigFileError(file, 'plugins', (err as Error).message, { cause: err });
  }
}

export async function readJobConfig(
  file: string,
  over: Partial<TrainConfig> = {},
  extraPlugins: readonly string[] = [],
): Promise<JobConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigFileError(
      file,
      '',
      `cannot read it (${(err as NodeJS.ErrnoException).code}); pass --config FILE (see configs/default.yaml)`,
      { cause: err },
    );
  }
  return parseJobConfig(text, file, over, extraPlugins);
}

/**
 * The dev evaluation of a run: the one its run.started recorded (a resumed run evaluates as it was
 * started, whatever the config of the resuming command says), else the job's (a log from before
 * the settings were recorded; said in a line).
 */
export function runEvalSettings(spec: RunSpec, job: JobConfig, log: (line: string) => void): EvalSettings {
  if (spec.eval) return spec.eval;
  const settings = { questions: job.evalQuestions, splits: job.evalSplits };
  log(
    `the run's run.started records no eval settings (an older log): evaluating ${settings.questions} questions of ${settings.splits.join(', ')} as the config says`,
  );
  return settings;
}

/** The spec a new run starts from: the job's training settings and inputs (world and policy required). */
export function runSpecOfJob(job: JobConfig): RunSpec {
  if (!job.world || !job.policy)
    throw new ConfigFileError(
      'config',
      !job.world ? 'world' : 'policy',
      'config.world and config.policy (world dir and base checkpoint) are required',
    );
  return {
    train: job.train,
    worldDir: job.world,
    basePolicy: job.policy,
    topK: job.topK,
    tools: job.tools,
    index: job.index,
    eval: { questions: job.evalQuestions, splits: job.evalSplits },
    keepCheckpoints: job.keepCheckpoints,
    plugins: job.plugins,
  };
}
