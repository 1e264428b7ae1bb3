/**
 * An experiment spec: a grid of training runs (cells x seeds) over one base config.
 *
 *   name: tiny                    # [A-Za-z0-9_-]{1,32}: run ids and the report folder derive from it
 *   title: GRPO vs AKBE, tiny     # optional, the report's heading
 *   base: configs/tiny.yaml       # optional base config file (an `akbe train --config` file)
 *   config: { lr: 0.001 }         # optional inline settings over the base
 *   steps: 2                      # optional, over both
 *   world: .akbe/world            # optional, over both
 *   policy: assets/base           # optional, over both
 *   seeds: [1, 2]                 # the config's `seed` of each cell's runs
 *   baseline: grpo                # optional: the cell label paired differences are taken against
 *   grid:                         # one entry per algorithm; a list value expands into one cell each
 *     - algo: grpo
 *     - algo: akbe
 *       targetContext: [own, with-tool]
 *   claims:                       # optional: tested claims, the report's Claims section (claims.ts)
 *     - { claim: AKBE lowers test TC, metric: tc, split: test, direction: less, cells: [akbe, grpo] }
 *
 * `{seed}` in a cell's `frozenPolicy` is the run's seed (settingsForSeed: each seed of an
 * offline cell freezes its own seed's run).
 * Paths are relative to the working directory, as in config files. Each cell's config is the base,
 * then `config`, then `steps`/`world`/`policy`, then the grid entry's settings, then the seed;
 * it is validated like an `akbe train` config, and errors name the spec file and the key.
 * Run ids: `<name>-<cell label>-s<seed>` (characters outside [A-Za-z0-9_-] become `_`), or a
 * hash form when that exceeds 64 characters: the same spec always names the same runs.
 */

import { createHash } from 'node:crypto';
import YAML from 'yaml';
import { isBaseAlgorithm } from '../rl/algorithms/index.js';
import { type Claim, parseClaims } from './claims.js';

export class SpecError extends Error {
  constructor(
    readonly file: string,
    readonly key: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`${file}: ${key ? `${key}: ` : ''}${message}`, opts);
    this.name = 'SpecError';
  }
}

export interface ExperimentSpec {
  file: string;
  name: string;
  title: string;
  base?: string;
  /** Settings over the base (config, then steps/world/policy). */
  over: Record<string, unknown>;
  /** Where each of `over`'s keys was set in the spec (`config.lr`, `steps`), for errors. */
  overFrom: Record<string, string>;
  seeds: number[];
  baseline?: string;
  cells: Cell[];
  /** Claims the report tests (claims.ts); [] when the spec has none. */
  claims: Claim[];
}

export interface Cell {
  /** Index of the grid entry it came from (for error messages). */
  entry: number;
  label: string;
  algo: string;
  /** The entry's settings for this cell (algo included). */
  settings: Record<string, unknown>;
}

export interface PlannedRun {
  cell: Cell;
  seed: number;
  runId: string;
}

const TOP_KEYS = [
  'name',
  'title',
  'base',
  'config',
  'steps',
  'world',
  'policy',
  'seeds',
  'baseline',
  'grid',
  'claims',
];
/** Settings whose value is itself a list: a list there is the value, not an expansion. */
const LIST_SETTINGS = new Set(['evalSplits', 'tools']);
const NAME = /^[A-Za-z0-9_-]{1,32}$/;

const isMap = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);
const shown = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/** Parses and checks a spec's text (YAML, or JSON when the file ends in .json). */
export async function parseSpec(text: string, file: string): Promise<ExperimentSpec> {
  const raw = parseText(text, file);
  for (const k of Object.keys(raw))
    if (!TOP_KEYS.includes(k)) throw new SpecError(file, k, `unknown key; a spec has ${TOP_KEYS.join(', ')}`);
  const name = raw.name;
  if (typeof name !== 'string' || !NAME.test(name))
    throw new SpecError(file, 'name', `must be 1-32 characters from [A-Za-z0-9_-], got ${shown(name)}`);
  const str = (k: string) => {
    const v = raw[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '')
      throw new SpecError(file, k, `must be a non-empty string, got ${shown(v)}`);
    return v;
  };
  const { over, overFrom } = overrides(raw, file, str);
  const seeds = checkSeeds(raw.seeds, file);
  if (!Array.isArray(raw.grid) || raw.grid.length === 0)
    throw new SpecError(file, 'grid', 'must be a non-empty list of cells, each with an algo');
  const cells = raw.grid.flatMap((entry, i) => expandEntry(file, entry, i));
  const labels = new Map<string, Cell>();
  for (const c of cells) {
    const prev = labels.get(c.label);
    if (prev)
      throw new SpecError(file, `grid[${c.entry}]`, `repeats the cell '${c.label}' of grid[${prev.entry}]`);
    labels.set(c.label, c);
  }
  const baseline = str('baseline');
  if (baseline !== undefined && !labels.has(baseline))
    throw new SpecError(file, 'baseline', `names no cell; the cells are ${[...labels.keys()].join(', ')}`);
  return {
    file,
    name,
    title: str('title') ?? name,
    base: str('base'),
    over,
    overFrom,
    seeds,
    baseline: baseline ?? cells.find((c) => isBaseAlgorithm(c.algo))?.label,
    cells,
    claims: parseClaims(raw.claims, new Set(labels.keys()), (key, msg) => {
      throw new SpecError(file, key, msg);
    }),
  };
}

/** The spec's text as a mapping (YAML, or JSON for a .json file). */
function parseText(text: string, file: string): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new SpecError(
      file,
      '',
      `not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
      { cause: err },
    );
  }
  if (!isMap(raw)) throw new SpecError(file, '', 'must be a mapping with name, seeds and grid');
  return raw;
}

/** The settings every cell gets (config:, steps:, world:, policy:) and the spec key each came from. */
function overrides(raw: Record<string, unknown>, file: string, str: (k: string) => string | undefined) {
  const over: Record<string, unknown> = {};
  const overFrom: Record<string, string> = {};
  if (raw.config !== undefined) {
    if (!isMap(raw.config)) throw new SpecError(file, 'config', 'must be a mapping of config settings');
    if ('seed' in raw.config)
      throw new SpecError(file, 'config.seed', "seeds come from the spec's seeds list");
    Object.assign(over, raw.config);
    for (const k of Object.keys(raw.config)) overFrom[k] = `config.${k}`;
  }
  if (raw.steps !== undefined) {
    if (!Number.isInteger(raw.steps) || (raw.steps as number) < 1)
      throw new SpecError(file, 'steps', `must be an integer >= 1, got ${shown(raw.steps)}`);
    over.steps = raw.steps;
    overFrom.steps = 'steps';
  }
  for (const k of ['world', 'policy'])
    if (str(k) !== undefined) {
      over[k] = str(k);
      overFrom[k] = k;
    }
  return { over, overFrom };
}

/** seeds: a non-empty list of distinct integers in [0, 2^32). */
function checkSeeds(seeds: unknown, file: string): number[] {
  if (!Array.isArray(seeds) || seeds.length === 0)
    throw new SpecError(file, 'seeds', `must be a non-empty list of integers, got ${shown(seeds)}`);
  seeds.forEach((s, i) => {
    if (!Number.isInteger(s) || s < 0 || s > 0xffffffff)
      throw new SpecError(file, `seeds[${i}]`, `must be an integer in [0, 2^32), got ${shown(s)}`);
    if (seeds.indexOf(s) !== i) throw new SpecError(file, `seeds[${i}]`, `repeats seed ${s}`);
  });
  return seeds as number[];
}

/** One grid entry -> its cells: the cartesian product of its list-valued settings. */
function expandEntry(file: string, entry: unknown, i: number): Cell[] {
  const at = `grid[${i}]`;
  if (!isMap(entry)) throw new SpecError(file, at, 'must be a mapping with an algo');
  if (typeof entry.algo !== 'string' || entry.algo === '')
    throw new SpecError(file, `${at}.algo`, `must be an algorithm name, got ${shown(entry.algo)}`);
  if ('seed' in entry) throw new SpecError(file, `${at}.seed`, "seeds come from the spec's seeds list");
  if ('label' in entry && typeof entry.label !== 'string')
    throw new SpecError(file, `${at}.label`, `must be a string, got ${shown(entry.label)}`);
  let combos: Array<Record<string, unknown>> = [{}];
  const varying: string[] = [];
  for (const [k, v] of Object.entries(entry)) {
    if (k === 'label') continue;
    if (Array.isArray(v) && !LIST_SETTINGS.has(k)) {
      if (v.length === 0) throw new SpecError(file, `${at}.${k}`, 'an empty list expands to no cell');
      varying.push(k);
      combos = combos.flatMap((c) => v.map((x) => ({ ...c, [k]: x })));
    } else combos = combos.map((c) => ({ ...c, [k]: v }));
  }
  if (typeof entry.label === 'string' && combos.length > 1)
    throw new SpecError(file, `${at}.label`, `names one cell but the entry expands into ${combos.length}`);
  return combos.map((settings) => ({
    entry: i,
    algo: settings.algo as string,
    settings,
    label:
      (entry.label as string | undefined) ??
      [
        settings.algo,
        ...Object.keys(settings)
          .filter((k) => k !== 'algo')
          .map((k) => `${k}=${shown(settings[k])}`),
      ].join(' '),
  }));
}

/** Every run of the grid, cell-major (all seeds of the first cell first). */
export function planRuns(spec: ExperimentSpec): PlannedRun[] {
  const runs = spec.cells.flatMap((cell) =>
    spec.seeds.map((seed) => ({ cell, seed, runId: runIdOf(spec.name, cell.label, seed) })),
  );
  const byId = new Map<string, PlannedRun>();
  for (const r of runs) {
    const prev = byId.get(r.runId);
    if (prev && prev.cell !== r.cell)
      throw new SpecError(
        spec.file,
        `grid[${r.cell.entry}]`,
        `cell '${r.cell.label}' gets the run id of '${prev.cell.label}' (${r.runId}); give one a label`,
      );
    byId.set(r.runId, r);
  }
  return runs;
}

/**
 * A cell's settings for one seed: `{seed}` in `frozenPolicy` becomes the seed, so each seed of an
 * offline cell freezes its own seed's run (`run:long150-grpo-s{seed}`) instead of all of them
 * sharing one checkpoint (shared frozen targets are not independent replicates).
 */
export function settingsForSeed(settings: Record<string, unknown>, seed: number): Record<string, unknown> {
  const frozen = settings.frozenPolicy;
  if (typeof frozen !== 'string' || !frozen.includes('{seed}')) return settings;
  return { ...settings, frozenPolicy: frozen.replaceAll('{seed}', String(seed)) };
}

export function runIdOf(name: string, label: string, seed: number): string {
  const plain = `${name}-${label.replace(/[^A-Za-z0-9_-]+/g, '_')}-s${seed}`;
  if (plain.length <= 64) return plain;
  const hash = createHash('sha256')
    .update(JSON.stringify([name, label, seed]))
    .digest('hex')
    .slice(0, 12);
  return `${name}-${hash}-s${seed}`;
}
