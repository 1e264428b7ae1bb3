/**
 * The CLI's small command framework: every command is a `CommandSpec` with a path
 * (`['nats', 'up']`), typed flags and a `run`. Parsing is strict: an unknown flag or a bad value
 * is a `UsageError`, printed as one line that names it, with exit code 2.
 */
import { parseArgs } from 'node:util';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface FlagSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** Shown in --help. */
  description: string;
  /** Placeholder shown in --help for string flags, e.g. `DIR`. */
  value?: string;
  default?: string | boolean;
  multiple?: boolean;
}

export interface CommandContext {
  /** Parsed flags (strings and booleans, defaults applied). */
  flags: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  /** Where human-readable output goes (stdout by default). */
  out: NodeJS.WritableStream;
  /** Where progress and diagnostics go (stderr by default). */
  err: NodeJS.WritableStream;
}

export interface CommandSpec {
  path: string[];
  summary: string;
  /** Positional arguments, for --help (e.g. `FILE`). */
  args?: string;
  flags?: Record<string, FlagSpec>;
  /** Returns the exit code (0 when nothing is returned). */
  // biome-ignore lint/suspicious/noConfusingVoidType: commands that always succeed return nothing
  run(ctx: CommandContext): Promise<number | undefined | void>;
}

export function commandName(spec: CommandSpec): string {
  return ['akbe', ...spec.path].join(' ');
}

export function helpFor(spec: CommandSpec): string {
  const lines = [
    `usage: ${commandName(spec)}${spec.flags && Object.keys(spec.flags).length ? ' [flags]' : ''}${spec.args ? ` ${spec.args}` : ''}`,
    '',
    spec.summary,
  ];
  const flags = Object.entries(spec.flags ?? {});
  if (flags.length) {
    lines.push('', 'flags:');
    for (const [name, f] of flags) {
      const left = `${f.short ? `-${f.short}, ` : '    '}--${name}${f.type === 'string' ? ` ${f.value ?? 'VALUE'}` : ''}`;
      const def = f.default !== undefined && f.default !== false ? ` (default: ${f.default})` : '';
      lines.push(`  ${left.padEnd(28)} ${f.description}${def}`);
    }
  }
  lines.push('  -h, --help                   show this help');
  return `${lines.join('\n')}\n`;
}

/** Parses argv (after the command path) for one command. Throws UsageError naming the problem. */
export function parseFlags(
  spec: CommandSpec,
  argv: string[],
): { flags: CommandContext['flags']; positionals: string[]; help: boolean } {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, f] of Object.entries(spec.flags ?? {})) {
    options[name] = {
      type: f.type,
      ...(f.short ? { short: f.short } : {}),
      ...(f.multiple ? { multiple: true } : {}),
    };
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: true });
  } catch (e) {
    throw new UsageError(
      `${commandName(spec)}: ${describeParseError(e as Error)} (see ${commandName(spec)} --help)`,
    );
  }
  const flags: CommandContext['flags'] = {};
  for (const [name, f] of Object.entries(spec.flags ?? {})) {
    flags[name] = (parsed.values[name] as string | boolean | string[] | undefined) ?? f.default;
  }
  return { flags, positionals: parsed.positionals, help: parsed.values.help === true };
}

function describeParseError(e: Error): string {
  // node's messages are long and mention internals; keep the part that names the flag.
  const unknown = /Unknown option '([^']+)'/.exec(e.message);
  if (unknown) return `unknown flag ${unknown[1]}`;
  const missing = /Option '([^']+)' argument missing/.exec(e.message);
  if (missing) return `flag ${missing[1].split(',').pop()!.trim().split(' ')[0]} needs a value`;
  return e.message.split('\n')[0];
}

/** Reads a string flag that must be present. */
export function requireString(ctx: CommandContext, name: string): string {
  const v = ctx.flags[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`missing required flag --${name}`);
  return v;
}

/** Reads a string flag that may be absent (an empty value counts as absent). */
export function optionalString(ctx: CommandContext, name: string): string | undefined {
  const v = ctx.flags[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** Returns `n` when it lies within the flag's bounds; a UsageError naming the flag otherwise. */
function inBounds(name: string, n: number, opts: { min?: number; max?: number }): number {
  if (opts.min !== undefined && n < opts.min)
    throw new UsageError(`--${name} must be >= ${opts.min}, got ${n}`);
  if (opts.max !== undefined && n > opts.max)
    throw new UsageError(`--${name} must be <= ${opts.max}, got ${n}`);
  return n;
}

type NumberFlagOptions = { min?: number; max?: number; fallback?: number };

/** Reads an integer flag within bounds; undefined when absent and no fallback is given. */
export function intFlag(ctx: CommandContext, name: string, opts: NumberFlagOptions = {}): number | undefined {
  return parsedFlag(ctx, name, opts, 'an integer', (v) =>
    /^-?\d+$/.test(v.trim()) && Number.isSafeInteger(Number(v)) ? Number(v) : null,
  );
}

/** Reads a float flag within bounds. */
export function numberFlag(
  ctx: CommandContext,
  name: string,
  opts: NumberFlagOptions = {},
): number | undefined {
  return parsedFlag(ctx, name, opts, 'a number', (v) =>
    v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : null,
  );
}

/** A numeric flag: `parse` gives null for text that is not `what`; then the bounds are checked. */
function parsedFlag(
  ctx: CommandContext,
  name: string,
  opts: NumberFlagOptions,
  what: string,
  parse: (v: string) => number | null,
): number | undefined {
  const v = ctx.flags[name];
  if (v === undefined) return opts.fallback;
  const n = typeof v === 'string' ? parse(v) : null;
  if (n === null) throw new UsageError(`--${name} must be ${what}, got '${v}'`);
  return inBounds(name, n, opts);
}

/** Reads a flag whose value must be one of `choices`. */
export function choiceFlag<T extends string>(
  ctx: CommandContext,
  name: string,
  choices: readonly T[],
  fallback?: T,
): T | undefined {
  const v = ctx.flags[name];
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !choices.includes(v as T)) {
    throw new UsageError(`--${name} must be one of ${choices.join('|')}, got '${v}'`);
  }
  return v as T;
}
