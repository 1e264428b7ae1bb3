/**
 * A very small runtime schema language for event payloads (no dependency). A `Schema<T>` checks an
 * unknown value and throws `SchemaViolation(path, problem)` naming the first bad field, e.g.
 * `data.reward` + `must be a number (got string)`. `object<T>()` takes one schema per key of T,
 * so the TypeScript interface and its runtime check cannot silently drift apart: a missing key or a
 * schema of the wrong type is a compile error.
 */

/** Internal: the first problem found. The catalog turns it into an `InvalidEventError`. */
export class SchemaViolation extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path} ${problem}`);
    this.name = 'SchemaViolation';
  }
}

export interface Schema<T> {
  /** Throws SchemaViolation when `value` (found at `path`) is not a T. */
  check(value: unknown, path: string): void;
  /** A key with an optional schema may be absent (or undefined). */
  readonly optional: boolean;
  /** Phantom: carries T for type checking only. */
  readonly __type?: T;
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (ArrayBuffer.isView(v)) return v.constructor.name;
  if (typeof v === 'number' && Number.isNaN(v)) return 'NaN';
  return typeof v;
}

function fail(path: string, problem: string, value: unknown): never {
  throw new SchemaViolation(path, `${problem} (got ${kindOf(value)})`);
}

function schema<T>(check: (value: unknown, path: string) => void): Schema<T> {
  return { check, optional: false };
}

export function string(opts: { nonEmpty?: boolean; pattern?: RegExp; hint?: string } = {}): Schema<string> {
  return schema((v, p) => {
    if (typeof v !== 'string') fail(p, 'must be a string', v);
    if (opts.nonEmpty && v === '') throw new SchemaViolation(p, 'must not be empty');
    if (opts.pattern && !opts.pattern.test(v)) {
      throw new SchemaViolation(
        p,
        `must match ${opts.hint ?? opts.pattern.source} (got ${JSON.stringify(v)})`,
      );
    }
  });
}

/** A finite number (NaN and ±Infinity are refused: they do not survive JSON export). */
export function number(opts: { min?: number; max?: number } = {}): Schema<number> {
  return schema((v, p) => {
    if (typeof v !== 'number' || !Number.isFinite(v)) fail(p, 'must be a finite number', v);
    if (opts.min !== undefined && v < opts.min)
      throw new SchemaViolation(p, `must be >= ${opts.min} (got ${v})`);
    if (opts.max !== undefined && v > opts.max)
      throw new SchemaViolation(p, `must be <= ${opts.max} (got ${v})`);
  });
}

export function int(opts: { min?: number; max?: number } = {}): Schema<number> {
  return schema((v, p) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) fail(p, 'must be an integer', v);
    if (opts.min !== undefined && v < opts.min)
      throw new SchemaViolation(p, `must be >= ${opts.min} (got ${v})`);
    if (opts.max !== undefined && v > opts.max)
      throw new SchemaViolation(p, `must be <= ${opts.max} (got ${v})`);
  });
}

/** A seed as produced by `deriveSeed`: an unsigned 32-bit integer. */
export const uint32 = (): Schema<number> => int({ min: 0, max: 0xffffffff });

export function bool(): Schema<boolean> {
  return schema((v, p) => {
    if (typeof v !== 'boolean') fail(p, 'must be a boolean', v);
  });
}

/** One of a closed set of string values. */
export function oneOf<const V extends readonly string[]>(values: V): Schema<V[number]> {
  return schema((v, p) => {
    if (typeof v !== 'string' || !values.includes(v)) {
      throw new SchemaViolation(p, `must be one of ${values.join('|')} (got ${JSON.stringify(v)})`);
    }
  });
}

export function nullable<T>(inner: Schema<T>): Schema<T | null> {
  return schema((v, p) => {
    if (v !== null) inner.check(v, p);
  });
}

export function optional<T>(inner: Schema<T>): Schema<T | undefined> {
  return { check: (v, p) => v !== undefined && inner.check(v, p), optional: true };
}

export function array<T>(item: Schema<T>, opts: { min?: number } = {}): Schema<T[]> {
  return schema((v, p) => {
    if (!Array.isArray(v)) fail(p, 'must be an array', v);
    if (opts.min !== undefined && v.length < opts.min) {
      throw new SchemaViolation(p, `must have at least ${opts.min} items (got ${v.length})`);
    }
    for (let i = 0; i < v.length; i++) item.check(v[i], `${p}[${i}]`);
  });
}

/** Exactly two items, each an `item` (a [start, end) range). */
export function pair<T>(item: Schema<T>): Schema<[T, T]> {
  return schema((v, p) => {
    if (!Array.isArray(v)) fail(p, 'must be an array of 2 items', v);
    if (v.length !== 2) throw new SchemaViolation(p, `must have 2 items (got ${v.length})`);
    item.check(v[0], `${p}[0]`);
    item.check(v[1], `${p}[1]`);
  });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || ArrayBuffer.isView(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** A string-keyed map whose values all match `value`. */
export function record<T>(value: Schema<T>): Schema<Record<string, T>> {
  return schema((v, p) => {
    if (!isPlainObject(v)) fail(p, 'must be an object', v);
    for (const [k, x] of Object.entries(v)) value.check(x, `${p}.${k}`);
  });
}

type Shape<T> = { [K in keyof T]-?: Schema<T[K]> };

/**
 * An object with exactly the keys of `shape` (unknown keys are refused: a typo is a bug, and a
 * new field is a schema change that needs a new `v`). `refine` checks rules across fields and
 * returns `[relativePath, problem]` for the first broken one.
 */
export function object<T>(shape: Shape<T>, refine?: (value: T) => [string, string] | null): Schema<T> {
  const entries = Object.entries(shape) as Array<[string, Schema<unknown>]>;
  return schema((v, p) => {
    if (!isPlainObject(v)) fail(p, 'must be an object', v);
    for (const [key, s] of entries) {
      const x = v[key];
      if (x === undefined) {
        if (!s.optional) throw new SchemaViolation(`${p}.${key}`, 'is required');
        continue;
      }
      s.check(x, `${p}.${key}`);
    }
    for (const key of Object.keys(v)) {
      if (!(key in shape) && v[key] !== undefined)
        throw new SchemaViolation(`${p}.${key}`, 'is not a known field');
    }
    const broken = refine?.(v as T);
    if (broken) throw new SchemaViolation(`${p}.${broken[0]}`, broken[1]);
  });
}

function typedArray<T>(
  ctor: { new (...args: never[]): T; name: string },
  elementCheck?: (x: number) => boolean,
  hint?: string,
): Schema<T> {
  return schema((v, p) => {
    if (!(v instanceof ctor)) fail(p, `must be an ${ctor.name}`, v);
    if (elementCheck) {
      const arr = v as unknown as ArrayLike<number>;
      for (let i = 0; i < arr.length; i++) {
        if (!elementCheck(arr[i])) throw new SchemaViolation(`${p}[${i}]`, `must be ${hint} (got ${arr[i]})`);
      }
    }
  });
}

export const int32Array = (): Schema<Int32Array> => typedArray(Int32Array);
/** Float32 values must be finite: a NaN logprob is a bug upstream, caught at the source. */
export const float32Array = (): Schema<Float32Array> => typedArray(Float32Array, Number.isFinite, 'finite');
/** A 0/1 mask. */
export const mask = (): Schema<Uint8Array> => typedArray(Uint8Array, (x) => x === 0 || x === 1, '0 or 1');

/** Any JSON value: plain objects, arrays, strings, finite numbers, booleans, null. */
export type { Json } from '../util/json.js';

import type { Json } from '../util/json.js';

export function json(): Schema<Json> {
  const check = (v: unknown, p: string): void => {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) fail(p, 'must be JSON (finite numbers only)', v);
      return;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) check(v[i], `${p}[${i}]`);
      return;
    }
    if (isPlainObject(v)) {
      for (const [k, x] of Object.entries(v)) check(x, `${p}.${k}`);
      return;
    }
    fail(p, 'must be JSON', v);
  };
  return schema(check);
}
