/**
 * The knobs of the synthetic knowledge world, as typed defaults with reasons. The default is
 * sized like the PyTorch prototype that met issue 5's acceptance figures (word-level vocabulary
 * of ~500 tokens, single-hop sequences <= 96 tokens, pretraining in minutes on one core);
 * `TINY_WORLD` is the same recipe at a size that tests build in well under a second.
 */

import { COMPOSE_KINDS } from './compose-kinds.js';
import { NOUNS } from './names.js';

export interface WorldConfig {
  seed: number;
  // ---- entities ----------------------------------------------------------------------------
  countries: number;
  cities: number;
  persons: number;
  orgs: number;
  works: number;
  /** Surnames the persons share (first names are unique): a surname search is ambiguous. */
  surnames: number;
  /** Share of cities and countries with a second name (a gold-answer alias). */
  aliasShare: number;
  // ---- the knowledge boundary -----------------------------------------------------------------
  /** Share of each entity type, by popularity rank, whose facts enter the pretraining mix. */
  headShare: number;
  /** Share of the remaining (tail) entities kept out of every question set: the demonstration
   *  pool whose passages and search demonstrations teach the policy to read observations. */
  demoShare: number;
  /** Zipf exponent of popularity (fact repetitions ∝ 1 / rank^s). */
  zipf: number;
  /** Repetitions of a head fact's sentence: the most popular gets max, none gets fewer than min. */
  maxFactRepeats: number;
  minFactRepeats: number;
  // ---- questions ----------------------------------------------------------------------------
  /** Train/dev/test shares of the question entities (split by entity, not by question). */
  splitShares: [number, number, number];
  /** Cap per multi-hop kind per (split, known) cell, so that multi-hop does not swamp single-hop. */
  multiHopPerCell: number;
  // ---- the hard preset's knobs (absent = off: the default world's files do not mention them) ----
  /** Probability that a fact's object is drawn from the subject's own role (and, for tail
   *  subjects, its own split) rather than uniformly: multi-hop chains are kept only when wholly
   *  known or wholly unknown within a split, so this is what yields unknown multi-hop questions. */
  bridgeAffinity?: number;
  /** Decoy passages per fact (0..2; corpus.ts DECOY_RELATIVES) in its subject's article: the
   *  fact's sentence about "the rival of" / "a partner of" the subject with a wrong object. They
   *  share the query's words, so they rank beside the true passage. */
  decoys?: number;
  /** Cap per comparison kind per (split, known) cell; absent = multiHopPerCell. Comparisons are
   *  yes/no (guessing scores 0.5), so uncapped they would pull every EM towards 0.5. */
  comparePerCell?: number;
  /** Composition templates (names in COMPOSE_KINDS); absent = the six of the default world. */
  composeKinds?: string[];
  // ---- pretraining mix ----------------------------------------------------------------------
  mix: MixConfig;
}

export interface MixConfig {
  /** Probability that a with-tool demonstration on a KNOWN fact searches (else answers directly,
   *  correctly): 0.5 makes the base over-search, leaving room for AKBE to remove searches. */
  searchKnown: number;
  /** Probability that a with-tool demonstration on an UNKNOWN fact searches; the rest answer
   *  with a confident guess. Sets how much the base under-searches (search rate ≈ this). */
  searchUnknown: number;
  /** With-tool demonstrations per question entity question (known and unknown). */
  withToolPerQuestion: number;
  /** With-tool demonstrations per demonstration-pool question (they carry the full search). */
  withToolPerDemoQuestion: number;
  /** No-tool demonstrations per question (answers from memory; guesses when unknown). */
  noToolPerQuestion: number;
  /** Fact sentences are packed into sequences of at most this many tokens. */
  factSequenceTokens: number;
  /** Passages returned per search (Search-R1: 3). */
  topK: number;
  /** Longer demonstrations are dropped (two searches with three passages each need ~125). */
  maxSequenceTokens: number;
}

export const DEFAULT_MIX: MixConfig = {
  // Demonstrated rates are above the targets because the trained base answers from memory more
  // often than its demonstrations do (0.5 / 0.8 gave measured 0.30 / 0.71 after 2000 steps).
  searchKnown: 0.7, // aim: the base searches on about half of the questions it knows
  searchUnknown: 0.85, // aim ~0.75: under-searches somewhat on unknown ones (what GRPO escalates)
  withToolPerQuestion: 3, // independent draws per question: a per-question rate, not a rule
  withToolPerDemoQuestion: 3, // reading observations is the skill unknown questions need
  noToolPerQuestion: 2,
  factSequenceTokens: 64,
  topK: 3,
  maxSequenceTokens: 128, // single-hop needs <= 96; the model's context
};

export const DEFAULT_WORLD: WorldConfig = {
  seed: 0,
  countries: 24, // >= 20 so that guessing a country scores ~0.04
  cities: 64,
  persons: 240,
  orgs: 60,
  works: 48, // <= NOUNS.length (a title's noun is its key)
  surnames: 30, // ~8 persons per surname: lexical search on a surname is ambiguous
  aliasShare: 0.3,
  headShare: 0.4,
  demoShare: 0.3,
  zipf: 1,
  maxFactRepeats: 48,
  minFactRepeats: 16, // with the QA demonstrations, enough for a d64 model to recall every head fact
  splitShares: [0.6, 0.2, 0.2],
  multiHopPerCell: 40,
  mix: DEFAULT_MIX,
};

/**
 * The hard preset (`akbe world build --preset hard`): the default world's recipe with more of what
 * a tiny base gets wrong, so that EM can move under RL (on the default world the base already
 * reaches with-tool EM 0.84 on test). docs/world.md has the measured base.
 */
export const HARD_WORLD: WorldConfig = {
  ...DEFAULT_WORLD,
  headShare: 0.2, // a larger unknown share (default 0.4)
  multiHopPerCell: 200, // no cap in practice: every composition the graph has (default 40)
  comparePerCell: 20, // yes/no questions (guessing scores 0.5) stay a minority
  bridgeAffinity: 0.9, // unknown 2-hop chains within a split (default: 1 and 3 in dev and test)
  decoys: 2, // two look-alike passages per fact: "The rival of X …", "A partner of X …"
  // Two searches of three passages with decoys need ~140 tokens; the policy's context follows
  // (akbe pretrain's --context defaults to this).
  mix: { ...DEFAULT_MIX, maxSequenceTokens: 160 },
  composeKinds: [
    'founder_birthplace',
    'author_birthplace',
    'birth_country',
    'org_country',
    'employer_founder',
    'author_employer',
    'founder_citizenship',
    'author_citizenship',
    'employer_city',
    'city_capital',
  ],
};

/** The sizes of the tiny world (tests): same recipe, a fraction of the work. */
export const TINY_SIZES = {
  countries: 21,
  cities: 24,
  persons: 48,
  orgs: 12,
  works: 12,
  surnames: 8,
  maxFactRepeats: 6,
  minFactRepeats: 2,
  multiHopPerCell: 6,
} as const satisfies Partial<WorldConfig>;

/** A world of ~60 entities for tests: same code paths, a fraction of the work. */
export const TINY_WORLD: WorldConfig = { ...DEFAULT_WORLD, ...TINY_SIZES };

export const WORLD_PRESETS = { default: DEFAULT_WORLD, hard: HARD_WORLD } as const;
export type WorldPreset = keyof typeof WORLD_PRESETS;

/** A preset's config at a size (`tiny` keeps the preset's knobs and takes TINY_SIZES). */
export function presetConfig(preset: WorldPreset, size: 'default' | 'tiny', seed: number): WorldConfig {
  const base = WORLD_PRESETS[preset];
  return size === 'tiny' ? { ...base, ...TINY_SIZES, seed } : { ...base, seed };
}

export class WorldConfigError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`world config: ${field} ${message}`);
    this.name = 'WorldConfigError';
  }
}

/** Rejects configurations the generator cannot satisfy (e.g. more persons than name pairs). */
export function validateWorldConfig(c: WorldConfig): void {
  const positive = ['countries', 'cities', 'persons', 'orgs', 'works', 'surnames'] as const;
  for (const f of positive)
    if (!Number.isInteger(c[f]) || c[f] < 1)
      throw new WorldConfigError(f, `must be a positive integer, got ${c[f]}`);
  if (c.countries < 20)
    throw new WorldConfigError(
      'countries',
      `must be >= 20 so that guessing scores near zero, got ${c.countries}`,
    );
  if (c.cities < c.countries)
    throw new WorldConfigError(
      'cities',
      `must be >= countries (every country has a capital), got ${c.cities}`,
    );
  if (c.works > NOUNS.length) throw new WorldConfigError('works', `exceeds the ${NOUNS.length} title nouns`);
  if (!Number.isInteger(c.decoys ?? 0) || (c.decoys ?? 0) < 0 || (c.decoys ?? 0) > 2)
    throw new WorldConfigError('decoys', `must be 0, 1 or 2, got ${c.decoys}`);
  for (const f of ['headShare', 'demoShare', 'aliasShare', 'bridgeAffinity'] as const) {
    const v = c[f] ?? 0;
    if (!(v >= 0 && v <= 1)) throw new WorldConfigError(f, `must lie in [0, 1], got ${v}`);
  }
  const s = c.splitShares;
  if (s.length !== 3 || s.some((x) => !(x >= 0)) || Math.abs(s[0] + s[1] + s[2] - 1) > 1e-9) {
    throw new WorldConfigError(
      'splitShares',
      `must be three non-negative shares summing to 1, got ${JSON.stringify(s)}`,
    );
  }
  if (c.minFactRepeats < 1 || c.maxFactRepeats < c.minFactRepeats)
    throw new WorldConfigError('minFactRepeats', 'must satisfy 1 <= min <= max');
  for (const k of c.composeKinds ?? [])
    if (!COMPOSE_KINDS.some((x) => x.kind === k))
      throw new WorldConfigError('composeKinds', `names no composition template: ${k}`);
  for (const f of ['searchKnown', 'searchUnknown'] as const) {
    if (!(c.mix[f] >= 0 && c.mix[f] <= 1))
      throw new WorldConfigError(`mix.${f}`, `must lie in [0, 1], got ${c.mix[f]}`);
  }
}
