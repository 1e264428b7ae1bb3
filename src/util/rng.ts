/**
 * Seeded random numbers. Every random draw in akbe (sampling, tie-breaks, shuffles, world
 * generation) comes from an `Rng` whose seed is derived from named parts, e.g.
 * `deriveSeed(runSeed, 'rollout', step, questionId, index)`, so that a replay recomputes every
 * draw bit for bit. The generator is xoshiro128** (small state, good statistical quality, fast in
 * 32-bit JavaScript integer arithmetic).
 */

/** Mixes a 32-bit value (the murmur3 finaliser): every input bit affects every output bit. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Folds a seed and any mix of numbers and strings into one uint32 seed. Order matters. */
export function deriveSeed(seed: number, ...parts: Array<number | string>): number {
  let h = fmix32((seed >>> 0) ^ 0x9e3779b9);
  for (const part of parts) {
    if (typeof part === 'number') {
      // Integers up to 2^53 keep their high bits: fold them in separately.
      const hi = Math.floor(part / 0x100000000) >>> 0;
      h = fmix32(h ^ fmix32(part >>> 0));
      h = fmix32(h ^ fmix32(hi ^ 0x632be5ab));
    } else {
      h = fmix32(h ^ 0x27d4eb2f);
      for (let i = 0; i < part.length; i++) h = fmix32(Math.imul(h ^ part.charCodeAt(i), 0x01000193));
    }
  }
  return h;
}

/** A seeded pseudo-random stream (known-answer tested); every draw of a run comes from one, seeded by `deriveSeed`. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(readonly seed: number) {
    // splitmix32 expands the seed so that nearby seeds give unrelated streams.
    let s = seed >>> 0;
    const next = () => {
      s = (s + 0x9e3779b9) >>> 0;
      return fmix32(s);
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    if ((this.a | this.b | this.c | this.d) === 0) this.a = 1;
  }

  /** Next uniform uint32. */
  u32(): number {
    const r = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0;
    const t = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= t;
    this.d = rotl(this.d, 11);
    return r;
  }

  /** Uniform float in [0, 1) with 53 random bits. */
  float(): number {
    return ((this.u32() >>> 5) * 67108864 + (this.u32() >>> 6)) / 9007199254740992;
  }

  /** Uniform integer in [0, n), without modulo bias. */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > 0x100000000)
      throw new RangeError(`Rng.int: n must be an integer in [1, 2^32], got ${n}`);
    const limit = 0x100000000 - (0x100000000 % n);
    let x = this.u32();
    while (x >= limit) x = this.u32();
    return x % n;
  }

  /** A uniformly chosen element. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Rng.pick: empty list');
    return items[this.int(items.length)];
  }

  /** Fisher-Yates shuffle in place; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }

  /** Standard normal draw (Box-Muller). */
  normal(): number {
    const u = 1 - this.float();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.float());
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
