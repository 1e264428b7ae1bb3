/**
 * Entities and facts. Each entity has a Zipf popularity rank within its type and a role:
 *
 *   head  its facts are in the pretraining mix (repeated ∝ popularity): the policy can know them;
 *   tail  its facts and passages are never in the pretraining mix: questions on it are unknown;
 *   demo  also never in the fact sentences, but its passages and full search demonstrations are
 *         in the mix (teaching the policy to read observations); it is in no question set.
 *
 * Head and tail entities are split train/dev/test by entity (stratified by role), so a question
 * set never shares a topic entity with another. Objects are drawn uniformly (flat answer priors),
 * except that a country's capital is one of its own cities.
 */
import { deriveSeed, Rng } from '../util/rng.js';
import type { WorldConfig } from './config.js';
import { ADJECTIVES, keyedNames, NameForge, NOUNS, ORG_SUFFIXES } from './names.js';
import { ENTITY_TYPES, type EntityType, RELATION_SPECS, type Relation, relationsOf } from './relations.js';

export type Role = 'head' | 'tail' | 'demo';
export const SPLITS = ['train', 'dev', 'test'] as const;
export type Split = (typeof SPLITS)[number];

export interface Entity {
  id: string;
  type: EntityType;
  name: string;
  /** Other names that count as the same gold answer. */
  aliases: string[];
  /** Popularity rank within the type, 0 = most popular. */
  rank: number;
  role: Role;
  /** Question split of a head or tail entity; null for the demonstration pool. */
  split: Split | null;
}

export interface Fact {
  id: string;
  subject: string;
  relation: Relation;
  object: string;
  /** Times its sentence appears in the pretraining mix (0 unless the subject is head). */
  repeats: number;
}

export interface EntityGraph {
  entities: Entity[];
  facts: Fact[];
}

/** Generates the entities and facts of a world; every draw comes from a stream named after its stage. */
export function generateEntities(config: WorldConfig): EntityGraph {
  const forge = new NameForge(new Rng(deriveSeed(config.seed, 'names')));
  const nameRng = new Rng(deriveSeed(config.seed, 'name-pairs'));
  const names: Record<EntityType, string[]> = {
    country: forge.words(config.countries),
    city: forge.words(config.cities),
    // The first word of every name is unique to its entity (a tiny model recalls facts by one
    // token); the second is shared (surnames, company kinds, title adjectives), so lexical search
    // on a name also finds its look-alikes.
    person: keyedNames(nameRng, forge.words(config.persons), forge.words(config.surnames)),
    org: keyedNames(nameRng, forge.words(config.orgs), ORG_SUFFIXES),
    work: keyedNames(nameRng, nameRng.shuffle([...NOUNS]).slice(0, config.works), ADJECTIVES).map((t) => {
      const [noun, adjective] = t.split(' ');
      return `The ${adjective} ${noun}`;
    }),
  };
  const aliasRng = new Rng(deriveSeed(config.seed, 'aliases'));
  const entities: Entity[] = [];
  for (const type of ENTITY_TYPES) {
    const roleRng = new Rng(deriveSeed(config.seed, 'roles', type));
    const n = names[type].length;
    const ranks = roleRng.shuffle(Array.from({ length: n }, (_, i) => i));
    const heads = Math.round(n * config.headShare);
    const rest = roleRng.shuffle(Array.from({ length: n - heads }, (_, i) => heads + i));
    const demoRanks = new Set(rest.slice(0, Math.round(rest.length * config.demoShare)));
    for (let i = 0; i < n; i++) {
      const rank = ranks[i];
      const role: Role = rank < heads ? 'head' : demoRanks.has(rank) ? 'demo' : 'tail';
      const aliases =
        (type === 'city' || type === 'country') && aliasRng.float() < config.aliasShare ? [forge.word()] : [];
      entities.push({ id: `${type}:${i}`, type, name: names[type][i], aliases, rank, role, split: null });
    }
  }
  assignSplits(entities, config);
  return { entities, facts: generateFacts(entities, config) };
}

/** Stratified by (type, role): each split gets its share of known and of unknown entities. */
function assignSplits(entities: Entity[], config: WorldConfig): void {
  const rng = new Rng(deriveSeed(config.seed, 'splits'));
  for (const type of ENTITY_TYPES) {
    for (const role of ['head', 'tail'] as const) {
      const group = rng.shuffle(entities.filter((e) => e.type === type && e.role === role));
      const nTrain = Math.round(group.length * config.splitShares[0]);
      const nDev = Math.round(group.length * config.splitShares[1]);
      group.forEach((e, i) => {
        e.split = i < nTrain ? 'train' : i < nTrain + nDev ? 'dev' : 'test';
      });
    }
  }
}

function generateFacts(entities: Entity[], config: WorldConfig): Fact[] {
  const rng = new Rng(deriveSeed(config.seed, 'facts'));
  const byType = (t: EntityType) => entities.filter((e) => e.type === t);
  const countries = byType('country');
  const cities = byType('city');
  // The first `countries` cities, in a random order, are the capitals; a capital lies in its country.
  const capitalOf = new Map<string, Entity>();
  const cityOrder = rng.shuffle([...cities]);
  countries.forEach((c, i) => {
    capitalOf.set(c.id, cityOrder[i]);
  });
  const countryOfCapital = new Map<string, Entity>();
  for (const [country, city] of capitalOf)
    countryOfCapital.set(city.id, countries.find((c) => c.id === country)!);
  const pools = new Map(ENTITY_TYPES.map((t) => [t, byType(t)]));
  const affinity = config.bridgeAffinity ?? 0;
  // Without affinity no extra draw is made, so the default world's facts stay as they were.
  const objectsOf = (t: EntityType, subject: Entity) => {
    if (affinity === 0 || rng.float() >= affinity) return pools.get(t)!;
    const own = pools.get(t)!.filter((o) => sameCell(o, subject));
    return own.length > 0 ? own : pools.get(t)!;
  };
  const facts: Fact[] = [];
  for (const e of entities) {
    for (const relation of relationsOf(e.type)) {
      let object: Entity;
      if (relation === 'capital') object = capitalOf.get(e.id)!;
      else if (relation === 'located_in')
        object = countryOfCapital.get(e.id) ?? rng.pick(objectsOf('country', e));
      else object = rng.pick(objectsOf(RELATION_SPECS[relation].object, e));
      const repeats = e.role === 'head' ? factRepeats(e.rank, config) : 0;
      facts.push({ id: `fact:${facts.length}`, subject: e.id, relation, object: object.id, repeats });
    }
  }
  return facts;
}

/** Same role, and for tail entities the same split: the cell a multi-hop chain must stay in. */
export function sameCell(a: Entity, b: Entity): boolean {
  return a.role === b.role && (a.role !== 'tail' || a.split === b.split);
}

/** Zipf repetitions: max / (rank + 1)^s, clamped to [min, max]. Head ranks are 0..heads-1. */
export function factRepeats(rank: number, config: WorldConfig): number {
  const r = Math.round(config.maxFactRepeats / (rank + 1) ** config.zipf);
  return Math.min(config.maxFactRepeats, Math.max(config.minFactRepeats, r));
}

/** Index of an entity graph by id, and the one fact per (subject, relation). */
export class WorldIndex {
  readonly entity = new Map<string, Entity>();
  readonly factById = new Map<string, Fact>();
  private readonly factBy = new Map<string, Fact>();

  constructor(readonly graph: EntityGraph) {
    for (const e of graph.entities) this.entity.set(e.id, e);
    for (const f of graph.facts) {
      this.factBy.set(`${f.subject}|${f.relation}`, f);
      this.factById.set(f.id, f);
    }
  }

  fact(subject: string, relation: Relation): Fact {
    const f = this.factBy.get(`${subject}|${relation}`);
    if (!f) throw new RangeError(`no fact ${relation} for ${subject}`);
    return f;
  }

  name(id: string): string {
    return this.entity.get(id)!.name;
  }

  /** The fact's sentence, as in the corpus and the pretraining mix. */
  sentence(f: Fact): string {
    return RELATION_SPECS[f.relation].sentence(this.name(f.subject), this.name(f.object));
  }

  /** Whether a fact is in the pretraining mix. */
  known(f: Fact): boolean {
    return this.entity.get(f.subject)!.role === 'head';
  }
}
