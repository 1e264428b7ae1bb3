/**
 * The world's relations and their surface forms. A fact (subject, relation, object) is written
 * the same way everywhere it appears: as a corpus passage, as a pretraining fact sentence, and as
 * the sentence a demonstration recites inside `<think>` when it answers from memory. That shared
 * sentence is what lets a tiny model turn "Where was X born?" into the completion of "X was born
 * in" that it memorised.
 */

export const ENTITY_TYPES = ['country', 'city', 'person', 'org', 'work'] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];

export const RELATIONS = [
  'born_in',
  'citizen_of',
  'works_for',
  'founded_by',
  'based_in',
  'written_by',
  'located_in',
  'capital',
] as const;
export type Relation = (typeof RELATIONS)[number];

export interface RelationSpec {
  subject: EntityType;
  object: EntityType;
  /** The fact as a sentence. */
  sentence(s: string, o: string): string;
  /** The single-hop question asking for the object. */
  question(s: string): string;
  /** The search query a demonstration issues for the object (name + the passage's key word). */
  query(s: string): string;
}

export const RELATION_SPECS: Record<Relation, RelationSpec> = {
  born_in: {
    subject: 'person',
    object: 'city',
    sentence: (s, o) => `${s} was born in ${o}.`,
    question: (s) => `Where was ${s} born?`,
    query: (s) => `${s} born`,
  },
  citizen_of: {
    subject: 'person',
    object: 'country',
    sentence: (s, o) => `${s} is a citizen of ${o}.`,
    question: (s) => `Which country is ${s} a citizen of?`,
    query: (s) => `${s} citizen`,
  },
  works_for: {
    subject: 'person',
    object: 'org',
    sentence: (s, o) => `${s} works for ${o}.`,
    question: (s) => `Who does ${s} work for?`,
    query: (s) => `${s} works for`,
  },
  founded_by: {
    subject: 'org',
    object: 'person',
    sentence: (s, o) => `${s} was founded by ${o}.`,
    question: (s) => `Who founded ${s}?`,
    query: (s) => `${s} founded`,
  },
  based_in: {
    subject: 'org',
    object: 'city',
    sentence: (s, o) => `${s} is based in ${o}.`,
    question: (s) => `Where is ${s} based?`,
    query: (s) => `${s} based`,
  },
  written_by: {
    subject: 'work',
    object: 'person',
    sentence: (s, o) => `${s} was written by ${o}.`,
    question: (s) => `Who wrote ${s}?`,
    query: (s) => `${s} written`,
  },
  located_in: {
    subject: 'city',
    object: 'country',
    sentence: (s, o) => `${s} is a city in ${o}.`,
    question: (s) => `Which country is ${s} in?`,
    query: (s) => `${s} city`,
  },
  capital: {
    subject: 'country',
    object: 'city',
    sentence: (s, o) => `The capital of ${s} is ${o}.`,
    question: (s) => `What is the capital of ${s}?`,
    query: (s) => `capital of ${s}`,
  },
};

/** Relations whose subject is the given type, in the fixed order of RELATIONS. */
export function relationsOf(type: EntityType): Relation[] {
  return RELATIONS.filter((r) => RELATION_SPECS[r].subject === type);
}
