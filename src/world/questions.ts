/**
 * Question sets: single-hop (one fact), 2-hop composition (the object of the first fact is the
 * subject of the second) and comparison (two facts of one relation, answered yes/no; note that
 * guessing scores 0.5 on these, so report them apart).
 *
 * The oracle label `known` says whether every fact a question needs is in the pretraining mix.
 * Multi-hop questions are kept only when all their entities share one role, so a known question
 * needs only known facts and an unknown one only unknown facts; unknown entities of one question
 * also share its split, so no unknown entity of a dev question is read during RL on train.
 */
import { deriveSeed, Rng } from '../util/rng.js';
import { COMPOSE_KINDS, type ComposeKind } from './compose-kinds.js';
import type { WorldConfig } from './config.js';
import { type Entity, type Fact, type Split, sameCell, type WorldIndex } from './entities.js';
import { RELATION_SPECS, type Relation } from './relations.js';

export type Hop = 'single' | 'compose' | 'compare';

export interface WorldQuestion {
  id: string;
  /** `demo` questions feed only the pretraining demonstrations and are in no question file. */
  split: Split | 'demo';
  question: string;
  golden_answers: string[];
  hop: Hop;
  /** The relation (single-hop) or the multi-hop template. */
  kind: string;
  /** Oracle: were all the facts it needs in the pretraining mix? */
  known: boolean;
  /** Ids of the facts it needs, in reasoning order. */
  facts: string[];
  /** Ids of the subjects of those facts (its topic and bridge entities). */
  entities: string[];
}

/** The default world's compositions: the first six (a world without `composeKinds`). */
export const DEFAULT_COMPOSE_KINDS = COMPOSE_KINDS.slice(0, 6).map((k) => k.kind);

/** The composition templates a world uses, in COMPOSE_KINDS order. */
export function composeKindsOf(config: WorldConfig): ComposeKind[] {
  const names = config.composeKinds ?? DEFAULT_COMPOSE_KINDS;
  return COMPOSE_KINDS.filter((k) => names.includes(k.kind));
}

interface CompareKind {
  kind: string;
  relation: Relation;
  question(a: string, b: string): string;
}

export const COMPARE_KINDS: CompareKind[] = [
  {
    kind: 'same_birthplace',
    relation: 'born_in',
    question: (a, b) => `Were ${a} and ${b} born in the same city?`,
  },
  {
    kind: 'same_citizenship',
    relation: 'citizen_of',
    question: (a, b) => `Are ${a} and ${b} citizens of the same country?`,
  },
  {
    kind: 'same_author',
    relation: 'written_by',
    question: (a, b) => `Were ${a} and ${b} written by the same person?`,
  },
];

export function generateQuestions(index: WorldIndex, config: WorldConfig): WorldQuestion[] {
  const out: Omit<WorldQuestion, 'id'>[] = [];
  // Single-hop: one per fact.
  for (const f of index.graph.facts) {
    const s = index.entity.get(f.subject)!;
    out.push({
      split: questionSplit(s),
      question: RELATION_SPECS[f.relation].question(s.name),
      golden_answers: answersFor(index.entity.get(f.object)!),
      hop: 'single',
      kind: f.relation,
      known: s.role === 'head',
      facts: [f.id],
      entities: [s.id],
    });
  }
  const rng = new Rng(deriveSeed(config.seed, 'multi-hop'));
  const cap = config.multiHopPerCell;
  for (const k of composeKindsOf(config)) {
    const cells = new Map<string, number>();
    const topics = rng.shuffle(
      index.graph.entities.filter((e) => e.type === RELATION_SPECS[k.first].subject),
    );
    for (const topic of topics) {
      const f1 = index.fact(topic.id, k.first);
      const bridge = index.entity.get(f1.object)!;
      if (!bridgeAllowed(topic, bridge)) continue;
      const cell = `${topic.role}|${topic.split}`;
      if ((cells.get(cell) ?? 0) >= cap) continue;
      cells.set(cell, (cells.get(cell) ?? 0) + 1);
      const f2 = index.fact(bridge.id, k.second);
      out.push({
        split: questionSplit(topic),
        question: k.question(topic.name),
        golden_answers: answersFor(index.entity.get(f2.object)!),
        hop: 'compose',
        kind: k.kind,
        known: topic.role === 'head',
        facts: [f1.id, f2.id],
        entities: [topic.id, bridge.id],
      });
    }
  }
  const compareCap = config.comparePerCell ?? cap;
  for (const k of COMPARE_KINDS) out.push(...compareQuestions(index, k, rng, compareCap));
  return out.map((q, i) => ({ id: `q${i}`, ...q }));
}

/** Pairs within one (role, split) cell; half share the object (yes), half do not (no). */
function compareQuestions(
  index: WorldIndex,
  k: CompareKind,
  rng: Rng,
  cap: number,
): Omit<WorldQuestion, 'id'>[] {
  const subjects = index.graph.entities.filter((e) => e.type === RELATION_SPECS[k.relation].subject);
  const cells = new Map<string, Entity[]>();
  for (const e of subjects) {
    const key = `${e.role}|${e.split}`;
    cells.set(key, [...(cells.get(key) ?? []), e]);
  }
  const out: Omit<WorldQuestion, 'id'>[] = [];
  for (const members of cells.values()) {
    const fa = (e: Entity) => index.fact(e.id, k.relation);
    const pairs: [Entity, Entity][] = [];
    for (let i = 0; i < members.length; i++)
      for (let j = i + 1; j < members.length; j++) pairs.push([members[i], members[j]]);
    rng.shuffle(pairs);
    const yes = pairs.filter(([a, b]) => fa(a).object === fa(b).object);
    const no = pairs.filter(([a, b]) => fa(a).object !== fa(b).object);
    const n = Math.min(Math.floor(cap / 2), yes.length, no.length);
    const chosen = rng.shuffle([...yes.slice(0, n), ...no.slice(0, n)]);
    for (const [a0, b0] of chosen) {
      const [a, b] = rng.float() < 0.5 ? [a0, b0] : [b0, a0];
      const same = fa(a).object === fa(b).object;
      out.push({
        split: questionSplit(a),
        question: k.question(a.name, b.name),
        golden_answers: [same ? 'yes' : 'no'],
        hop: 'compare',
        kind: k.kind,
        known: a.role === 'head',
        facts: [fa(a).id, fa(b).id],
        entities: [a.id, b.id],
      });
    }
  }
  return out;
}

/**
 * Topic and bridge must share a role (so the question is wholly known or wholly unknown). An
 * unknown bridge must also share the split: RL on a train question reads the bridge's passages,
 * which would teach the policy facts of a dev question. A known bridge may come from any split.
 */
function bridgeAllowed(topic: Entity, bridge: Entity): boolean {
  return sameCell(topic, bridge);
}

function questionSplit(e: Entity): Split | 'demo' {
  return e.role === 'demo' ? 'demo' : e.split!;
}

/** The canonical name first, then the aliases. */
export function answersFor(e: Entity): string[] {
  return [e.name, ...e.aliases];
}

/** The facts of a question, resolved. */
export function questionFacts(index: WorldIndex, q: WorldQuestion): Fact[] {
  return q.facts.map((id) => index.factById.get(id)!);
}
