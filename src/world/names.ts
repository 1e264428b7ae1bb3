/**
 * Names for the world's entities. Person, place and company names are made-up words built from
 * syllables, so the world carries no real-world prior a tiny model could lean on; work titles are
 * "The <Adjective> <Noun>" from fixed English lists, so near-duplicate titles ("The Silent River",
 * "The Silent Garden") occur on purpose. Every made-up word is one token of the word-level
 * vocabulary and is unique across all pools.
 *
 * Each two-word name has a KEY word unique to its entity (a person's first name, a company's
 * name, a title's noun) and a SHARED word (surname, company kind, title adjective). The PyTorch
 * prototype's d64 model memorised facts keyed by one token; keys made of two shared words (any
 * first name with any surname) left it near chance after the same number of steps.
 */
import type { Rng } from '../util/rng.js';

const ONSETS = [
  'b',
  'd',
  'f',
  'g',
  'h',
  'k',
  'l',
  'm',
  'n',
  'p',
  'r',
  's',
  't',
  'v',
  'z',
  'br',
  'dr',
  'kr',
  'st',
  'tr',
  'gr',
  'sh',
  'th',
  'pl',
];
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'ai', 'ea', 'ou', 'y'];
const CODAS = ['', '', '', 'n', 'r', 'l', 's', 'm', 'th', 'nd', 'k', 'x'];

/** Words of the templates and prompts: a made-up name must never collide with one of them. */
export const RESERVED_WORDS = new Set(
  [
    'the',
    'where',
    'who',
    'what',
    'which',
    'were',
    'are',
    'was',
    'born',
    'city',
    'doc',
    'title',
    'search',
    'question',
    'answer',
    'memory',
    'think',
    'same',
    'yes',
    'no',
    'not',
    'sure',
    'need',
    'rival', // the hard preset's decoy passages
    'partner',
  ].map((w) => w.toLowerCase()),
);

export const ADJECTIVES = [
  'Silent',
  'Golden',
  'Broken',
  'Hidden',
  'Distant',
  'Crimson',
  'Quiet',
  'Burning',
  'Frozen',
  'Last',
  'Lost',
  'Bright',
  'Hollow',
  'Wild',
  'Pale',
  'Iron',
  'Silver',
  'Winter',
  'Secret',
  'Endless',
  'Northern',
  'Fallen',
  'Little',
  'Second',
];

export const NOUNS = [
  'River',
  'Garden',
  'Tower',
  'Harbor',
  'Mirror',
  'Orchard',
  'Voyage',
  'Lantern',
  'Bridge',
  'Forest',
  'Island',
  'Letter',
  'Kingdom',
  'Shadow',
  'Season',
  'Mountain',
  'Compass',
  'Window',
  'Road',
  'Crown',
  'Meadow',
  'Storm',
  'Feather',
  'Clock',
  'Anchor',
  'Candle',
  'Desert',
  'Falcon',
  'Glacier',
  'Hunter',
  'Journey',
  'Key',
  'Lake',
  'Machine',
  'Night',
  'Ocean',
  'Palace',
  'Quarry',
  'Rose',
  'Sparrow',
  'Throne',
  'Valley',
  'Wolf',
  'Archive',
  'Canyon',
  'Dragon',
  'Engine',
  'Fountain',
  'Harvest',
  'Lighthouse',
  'Moon',
  'Needle',
  'Painter',
  'Question',
  'Ribbon',
  'Sailor',
  'Temple',
  'Violin',
  'Whisper',
  'Cathedral',
];

export const ORG_SUFFIXES = ['Group', 'Works', 'Labs', 'Press', 'Bank', 'Studios'];

/** Draws made-up capitalised words, never repeating one and never a reserved word. */
export class NameForge {
  private readonly used = new Set<string>();

  constructor(private readonly rng: Rng) {}

  /** A new unique word of two or three syllables. */
  word(): string {
    for (let attempt = 0; attempt < 10_000; attempt++) {
      const syllables = this.rng.float() < 0.75 ? 2 : 3;
      let w = '';
      for (let s = 0; s < syllables; s++) {
        w += this.rng.pick(ONSETS) + this.rng.pick(VOWELS);
        if (s === syllables - 1) w += this.rng.pick(CODAS);
      }
      if (w.length < 4 || w.length > 9) continue;
      const cap = w[0].toUpperCase() + w.slice(1);
      if (this.used.has(cap) || RESERVED_WORDS.has(w)) continue;
      this.used.add(cap);
      return cap;
    }
    throw new RangeError('NameForge: ran out of unique words (raise the syllable inventory)');
  }

  words(n: number): string[] {
    return Array.from({ length: n }, () => this.word());
  }
}

/** `key second` for each key, the second word drawn uniformly from `shared` (so it repeats). */
export function keyedNames(rng: Rng, keys: readonly string[], shared: readonly string[]): string[] {
  return keys.map((k) => `${k} ${rng.pick(shared)}`);
}
