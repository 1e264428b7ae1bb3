/**
 * Demonstrations for the pretraining mix, as text segments (`train: false` for the prompt and the
 * observations, which are masked out of the loss). What each kind teaches:
 *
 *   wt-direct  with-tool, known fact: recite the fact in <think>, answer (always correct);
 *   wt-search  with-tool: "Let me search.", search, read the observation, recite, answer. On known facts
 *              (a coin flip with wt-direct, so the base over-searches) and on the demonstration
 *              pool (whose passages it may read);
 *   wt-prefix  with-tool, unknown question entity: "Let me search.", then the search call, and the
 *              sequence ends there: the tail name appears in a question -> search context (so the
 *              policy learns to copy unfamiliar names into queries) without its facts or passages;
 *   wt-guess   with-tool, unknown fact: recite a wrong fact with confidence and answer it; the
 *              share of these sets how much the base under-searches;
 *   nt-known   no-tool, known fact: recite and answer;
 *   nt-guess   no-tool, unknown fact: "not sure", then a plausible guess (never the true answer).
 */

import { informationBlock, type PromptPath, promptText, THINK } from '../text/prompts.js';
import type { Rng } from '../util/rng.js';
import type { MixConfig } from './config.js';
import type { WorldPassage } from './corpus.js';
import type { Entity, Fact, WorldIndex } from './entities.js';
import type { WorldQuestion } from './questions.js';
import { RELATION_SPECS } from './relations.js';
import { observationText, type Retriever } from './retrieval.js';

export const DEMO_KINDS = [
  'facts',
  'wt-direct',
  'wt-search',
  'wt-prefix',
  'wt-guess',
  'nt-known',
  'nt-guess',
] as const;
export type DemoKind = (typeof DEMO_KINDS)[number];

export interface Segment {
  text: string;
  /** Whether the tokens of this segment are loss targets. */
  train: boolean;
}

export interface Demo {
  kind: DemoKind;
  questionId: string | null;
  /** `<bos>` is implied before the first segment; `eos` says whether `<eos>` ends it. */
  segments: Segment[];
  eos: boolean;
}

export class DemoBuilder {
  /** Searches whose gold passage was not in the top-k (such demonstrations are dropped). */
  retrievalMisses = 0;
  searches = 0;

  constructor(
    private readonly index: WorldIndex,
    private readonly retriever: Retriever<WorldPassage>,
    private readonly mix: MixConfig,
  ) {}

  /** All the demonstrations of one question, drawn from `rng`. */
  forQuestion(q: WorldQuestion, rng: Rng): Demo[] {
    const out: Demo[] = [];
    const facts = q.facts.map((id) => this.index.factById.get(id)!);
    const pool = q.split === 'demo';
    const nWt = pool ? this.mix.withToolPerDemoQuestion : this.mix.withToolPerQuestion;
    for (let i = 0; i < nWt; i++) {
      const draw = rng.float();
      let demo: Demo | null;
      if (q.known)
        demo = draw < this.mix.searchKnown ? this.search(q, facts) : this.direct(q, facts, 'with-tool');
      else if (draw >= this.mix.searchUnknown) demo = this.guess(q, facts, 'with-tool', rng);
      else demo = pool ? this.search(q, facts) : this.prefix(q, facts);
      if (demo) out.push(demo);
    }
    for (let i = 0; i < this.mix.noToolPerQuestion; i++) {
      out.push(q.known ? this.direct(q, facts, 'no-tool') : this.guess(q, facts, 'no-tool', rng));
    }
    return out;
  }

  private direct(q: WorldQuestion, facts: Fact[], path: PromptPath): Demo {
    const think = facts.map((f) => this.index.sentence(f)).join(' ');
    return {
      kind: path === 'with-tool' ? 'wt-direct' : 'nt-known',
      questionId: q.id,
      segments: [
        prompt(path, q),
        { text: `<think> ${think} </think> ${answer(q.golden_answers[0])}`, train: true },
      ],
      eos: true,
    };
  }

  /** Searches each fact in order, reading the bridge name from the observation; null on a retrieval miss. */
  private search(q: WorldQuestion, facts: Fact[]): Demo | null {
    const segments: Segment[] = [
      prompt('with-tool', q),
      { text: `<think> ${THINK.search} </think>`, train: true },
    ];
    for (const f of facts) {
      const query = RELATION_SPECS[f.relation].query(this.index.name(f.subject));
      const hits = this.retriever.search(query, this.mix.topK);
      this.searches++;
      if (!hits.some((h) => h.fact === f.id)) {
        this.retrievalMisses++;
        return null;
      }
      segments.push(
        { text: `<search> ${query} </search>`, train: true },
        { text: informationBlock(observationText(hits)), train: false },
      );
    }
    // Single-hop recites what it read before answering; multi-hop answers straight after the last
    // observation, which keeps two searches within a 128-token context.
    const think = q.hop === 'single' ? `<think> ${this.index.sentence(facts[0])} </think> ` : '';
    segments.push({ text: `${think}${answer(q.golden_answers[0])}`, train: true });
    return { kind: 'wt-search', questionId: q.id, segments, eos: true };
  }

  private prefix(q: WorldQuestion, facts: Fact[]): Demo {
    const f = facts[0];
    const query = RELATION_SPECS[f.relation].query(this.index.name(f.subject));
    return {
      kind: 'wt-prefix',
      questionId: q.id,
      segments: [
        prompt('with-tool', q),
        { text: `<think> ${THINK.search} </think> <search> ${query} </search>`, train: true },
      ],
      eos: false,
    };
  }

  /**
   * A wrong answer. With tools it is a confident recitation of wrong facts about the question's own
   * subjects (never a claim about another entity, whose true fact may be known); without tools the
   * policy says it is unsure and guesses.
   */
  private guess(q: WorldQuestion, facts: Fact[], path: PromptPath, rng: Rng): Demo {
    let claims: Fact[];
    let guessed: string;
    if (q.hop === 'compare') {
      claims = facts.map((f) => this.wrongFact(f, rng));
      guessed = claims[0].object === claims[1].object ? 'yes' : 'no';
    } else {
      claims = [this.wrongFact(facts[0], rng)];
      // Single-hop: answer what was recited; composition: a wrong final object as well.
      const last = facts[facts.length - 1];
      guessed = this.index.name(facts.length === 1 ? claims[0].object : this.wrongObject(last, rng).id);
    }
    const think = path === 'with-tool' ? claims.map((f) => this.index.sentence(f)).join(' ') : THINK.unsure;
    return {
      kind: path === 'with-tool' ? 'wt-guess' : 'nt-guess',
      questionId: q.id,
      segments: [prompt(path, q), { text: `<think> ${think} </think> ${answer(guessed)}`, train: true }],
      eos: true,
    };
  }

  private wrongFact(f: Fact, rng: Rng): Fact {
    return { ...f, id: `guess:${f.id}`, object: this.wrongObject(f, rng).id, repeats: 0 };
  }

  /** A uniformly drawn entity of the object's type other than the true object. */
  private wrongObject(f: Fact, rng: Rng): Entity {
    const type = RELATION_SPECS[f.relation].object;
    const pool = this.objectPools.get(type) ?? this.index.graph.entities.filter((e) => e.type === type);
    this.objectPools.set(type, pool);
    for (;;) {
      const e = rng.pick(pool);
      if (e.id !== f.object) return e;
    }
  }

  private readonly objectPools = new Map<string, Entity[]>();
}

function prompt(path: PromptPath, q: WorldQuestion): Segment {
  return { text: promptText(path, q.question), train: false };
}

function answer(a: string): string {
  return `<answer> ${a} </answer>`;
}
