/**
 * Plugins: ES modules that register algorithms, advantage estimators, loss terms, row kinds or
 * tools. A run names them (`plugins: [./my-algo.js]` in its config, or `--plugin`), the
 * orchestrator loads them before it validates the config, and run.started records each one's
 * absolute path and sha256 in its config. Every other process of the run (`akbe worker`, `akbe train --resume`, `akbe replay`)
 * loads the recorded plugins from the log and refuses one whose bytes changed, so what ran is
 * what an audit recomputes with.
 *
 * A plugin's default export is a function that receives the registration API (PluginApi). It is
 * handed the API rather than importing `akbe/rl` itself because registries are module-level: a
 * plugin importing its own copy of akbe (another install, or the built package beside a source
 * checkout) would register into a registry the running akbe never reads.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { registerAdvantage } from '../rl/advantages.js';
import { outcomeRewards, registerAlgorithm } from '../rl/algorithms/index.js';
import { LossName, registerLoss } from '../rl/losses.js';
import { registerRowKind } from '../rl/row-kinds.js';
import { registerTool } from '../tools/registry.js';

/** What a plugin's default export receives: akbe's registries and the helpers an entry uses. */
export interface PluginApi {
  registerAlgorithm: typeof registerAlgorithm;
  registerAdvantage: typeof registerAdvantage;
  registerLoss: typeof registerLoss;
  registerRowKind: typeof registerRowKind;
  registerTool: typeof registerTool;
  outcomeRewards: typeof outcomeRewards;
  LossName: typeof LossName;
}

/** A plugin as run.started records it. */
export interface PluginRef {
  path: string;
  sha256: string;
}

/** A plugin that cannot be loaded: unreadable, not a module with a default function, or changed. */
export class PluginError extends Error {
  constructor(
    readonly path: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`plugin ${path}: ${message}`, opts);
    this.name = 'PluginError';
  }
}

const API: PluginApi = {
  registerAlgorithm,
  registerAdvantage,
  registerLoss,
  registerRowKind,
  registerTool,
  outcomeRewards,
  LossName,
};

/** Plugins this process has run, by absolute path -> sha256 (a registration must happen once). */
const loaded = new Map<string, string>();

async function digestOf(path: string): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw new PluginError(path, `cannot read it (${(err as NodeJS.ErrnoException).code})`, { cause: err });
  }
  return createHash('sha256').update(bytes).digest('hex');
}

async function run(path: string, sha256: string): Promise<void> {
  const before = loaded.get(path);
  if (before === sha256) return;
  if (before !== undefined)
    throw new PluginError(path, `changed while this process runs (sha256 ${before} -> ${sha256})`);
  let mod: { default?: unknown };
  try {
    mod = await import(pathToFileURL(path).href);
  } catch (err) {
    throw new PluginError(path, `cannot import it: ${(err as Error).message}`, { cause: err });
  }
  if (typeof mod.default !== 'function')
    throw new PluginError(path, 'its default export must be a function (api) => void (docs/api.md)');
  loaded.set(path, sha256);
  try {
    await (mod.default as (api: PluginApi) => unknown)(API);
  } catch (err) {
    throw new PluginError(path, `its registration failed: ${(err as Error).message}`, { cause: err });
  }
}

/** Loads plugins named by path (relative paths from `baseDir`), in order; returns what to record. */
export async function loadPlugins(paths: readonly string[], baseDir: string): Promise<PluginRef[]> {
  const refs: PluginRef[] = [];
  for (const p of paths) {
    const path = isAbsolute(p) ? p : resolve(baseDir, p);
    const sha256 = await digestOf(path);
    await run(path, sha256);
    refs.push({ path, sha256 });
  }
  return refs;
}

/** The plugin records of a run.started config (`config.plugins`); throws on a malformed entry. */
export function pluginRefsOf(recorded: unknown): PluginRef[] {
  if (recorded === undefined || recorded === null) return [];
  const ok = (x: unknown): x is PluginRef =>
    typeof x === 'object' &&
    x !== null &&
    typeof (x as PluginRef).path === 'string' &&
    isAbsolute((x as PluginRef).path) &&
    typeof (x as PluginRef).sha256 === 'string' &&
    /^[0-9a-f]{64}$/.test((x as PluginRef).sha256);
  if (!Array.isArray(recorded) || !recorded.every(ok))
    throw new PluginError(
      '(run.started)',
      `config.plugins must be a list of {path, sha256}, got ${JSON.stringify(recorded)}`,
    );
  return recorded.map(({ path, sha256 }) => ({ path, sha256 }));
}

/**
 * Loads the plugins a run recorded, each only if its bytes still have the recorded sha256: a
 * worker or an audit that ran other code than the orchestrator did would prove nothing.
 */
export async function loadRecordedPlugins(recorded: unknown): Promise<PluginRef[]> {
  const refs = pluginRefsOf(recorded);
  for (const { path, sha256 } of refs) {
    const now = await digestOf(path);
    if (now !== sha256)
      throw new PluginError(
        path,
        `its sha256 is ${now}, but the run recorded ${sha256}: it changed since the run started`,
      );
    await run(path, sha256);
  }
  return refs;
}
