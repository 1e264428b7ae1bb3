/**
 * The 2-hop composition templates (the object of the first fact is the subject of the second).
 * Their own module because both the world config (which validates `composeKinds` names) and the
 * question generator (which uses them) read the list, and the generator imports the config.
 */
import type { Relation } from './relations.js';

export interface ComposeKind {
  kind: string;
  first: Relation;
  second: Relation;
  question(s: string): string;
}

export const COMPOSE_KINDS: ComposeKind[] = [
  {
    kind: 'founder_birthplace',
    first: 'founded_by',
    second: 'born_in',
    question: (s) => `Where was the founder of ${s} born?`,
  },
  {
    kind: 'author_birthplace',
    first: 'written_by',
    second: 'born_in',
    question: (s) => `Where was the author of ${s} born?`,
  },
  {
    kind: 'birth_country',
    first: 'born_in',
    second: 'located_in',
    question: (s) => `In which country was ${s} born?`,
  },
  {
    kind: 'org_country',
    first: 'based_in',
    second: 'located_in',
    question: (s) => `In which country is ${s} based?`,
  },
  {
    kind: 'employer_founder',
    first: 'works_for',
    second: 'founded_by',
    question: (s) => `Who founded the company ${s} works for?`,
  },
  {
    kind: 'author_employer',
    first: 'written_by',
    second: 'works_for',
    question: (s) => `Who does the author of ${s} work for?`,
  },
  // The hard preset's further compositions (config.composeKinds).
  {
    kind: 'founder_citizenship',
    first: 'founded_by',
    second: 'citizen_of',
    question: (s) => `Which country is the founder of ${s} a citizen of?`,
  },
  {
    kind: 'author_citizenship',
    first: 'written_by',
    second: 'citizen_of',
    question: (s) => `Which country is the author of ${s} a citizen of?`,
  },
  {
    kind: 'employer_city',
    first: 'works_for',
    second: 'based_in',
    question: (s) => `Where is the company ${s} works for based?`,
  },
  {
    kind: 'city_capital',
    first: 'located_in',
    second: 'capital',
    question: (s) => `What is the capital of the country ${s} is in?`,
  },
];
