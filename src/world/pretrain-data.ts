/**
 * The pretraining mix: packed fact sentences of the head entities (each repeated by popularity,
 * tail facts never), plus the demonstrations of demos.ts for every question of every split and of
 * the demonstration pool, tokenized and shuffled in a seeded order.
 *
 * Layout (all typed arrays, sequences concatenated):
 *   tokens  [N]    uint16 token ids, each sequence starting with <bos>
 *   mask    [N]    1 where the token is a loss target; 0 on <bos>, the prompt and the
 *                  `<information> … </information>` observations
 *   offsets [S+1]  sequence s is tokens[offsets[s] .. offsets[s+1])
 *   kinds   [S]    index into DEMO_KINDS
 *
 * Leakage rules (tested): a tail fact never appears (its sentence, its passage, or its answer
 * after its question); observations retrieve only from head and demonstration-pool passages.
 */

import { pieces, type WorldTokenizer } from '../text/word-tokenizer.js';
import { deriveSeed, Rng } from '../util/rng.js';
import type { WorldConfig } from './config.js';
import { pretrainingView, type WorldPassage } from './corpus.js';
import { DEMO_KINDS, type Demo, DemoBuilder } from './demos.js';
import type { WorldIndex } from './entities.js';
import type { WorldQuestion } from './questions.js';
import { LexicalRetriever } from './retrieval.js';

export interface PretrainMix {
  tokens: Uint16Array;
  mask: Uint8Array;
  offsets: Uint32Array;
  kinds: Uint8Array;
}

export interface DemoStats {
  searches: number;
  /** Search demonstrations dropped because the gold passage was not in the top-k. */
  retrievalMisses: number;
  /** Demonstrations dropped for exceeding `mix.maxSequenceTokens`. */
  tooLong: number;
}

/** Every sequence of the mix as text segments, in generation order (not yet shuffled). */
export function buildDemos(
  index: WorldIndex,
  passages: readonly WorldPassage[],
  questions: readonly WorldQuestion[],
  config: WorldConfig,
): { demos: Demo[]; stats: DemoStats } {
  const demos: Demo[] = factSequences(index, config);
  const retriever = new LexicalRetriever(passages, pretrainingView(index, passages));
  const builder = new DemoBuilder(index, retriever, config.mix);
  let tooLong = 0;
  for (const q of questions) {
    for (const d of builder.forQuestion(q, new Rng(deriveSeed(config.seed, 'demo', q.id)))) {
      if (demoLength(d) > config.mix.maxSequenceTokens) tooLong++;
      else demos.push(d);
    }
  }
  return { demos, stats: { searches: builder.searches, retrievalMisses: builder.retrievalMisses, tooLong } };
}

/** Head fact sentences, each `repeats` times, shuffled and packed into sequences of bounded length. */
export function factSequences(index: WorldIndex, config: WorldConfig): Demo[] {
  const sentences: string[] = [];
  for (const f of index.graph.facts) for (let r = 0; r < f.repeats; r++) sentences.push(index.sentence(f));
  new Rng(deriveSeed(config.seed, 'fact-order')).shuffle(sentences);
  const out: Demo[] = [];
  let current: string[] = [];
  let length = 1; // <bos>
  const budget = config.mix.factSequenceTokens - 1; // room for <eos>
  for (const s of sentences) {
    const n = pieces(s).length;
    if (current.length > 0 && length + n > budget) {
      out.push(factDemo(current));
      current = [];
      length = 1;
    }
    current.push(s);
    length += n;
  }
  if (current.length > 0) out.push(factDemo(current));
  return out;
}

function factDemo(sentences: string[]): Demo {
  return {
    kind: 'facts',
    questionId: null,
    segments: [{ text: sentences.join(' '), train: true }],
    eos: true,
  };
}

/** Tokens of a demonstration once encoded (<bos>, the segments' pieces, <eos>). */
export function demoLength(d: Demo): number {
  return 1 + d.segments.reduce((n, s) => n + pieces(s.text).length, 0) + (d.eos ? 1 : 0);
}

/** Every text the tokenizer must cover in the demonstrations. */
export function* demoTexts(demos: readonly Demo[]): Generator<string> {
  for (const d of demos) for (const s of d.segments) yield s.text;
}

/** Token ids and loss mask of one demonstration. */
export function encodeDemo(tok: WorldTokenizer, demo: Demo): { tokens: number[]; mask: number[] } {
  const tokens = [tok.bos];
  const mask = [0];
  for (const s of demo.segments) {
    for (const id of tok.encode(s.text)) {
      tokens.push(id);
      mask.push(s.train ? 1 : 0);
    }
  }
  if (demo.eos) {
    tokens.push(tok.eos);
    mask.push(1);
  }
  return { tokens, mask };
}

/** Tokenizes the demonstrations into the typed-array mix, in a seeded shuffled order. */
export function encodeMix(
  tok: WorldTokenizer,
  demos: readonly Demo[],
  seed: number,
): { mix: PretrainMix; order: number[] } {
  if (tok.size > 0xffff) throw new RangeError(`pretrain mix: vocabulary of ${tok.size} does not fit uint16`);
  const order = new Rng(deriveSeed(seed, 'mix-order')).shuffle(demos.map((_, i) => i));
  const encoded = order.map((i) => encodeDemo(tok, demos[i]));
  const total = encoded.reduce((n, e) => n + e.tokens.length, 0);
  const mix: PretrainMix = {
    tokens: new Uint16Array(total),
    mask: new Uint8Array(total),
    offsets: new Uint32Array(encoded.length + 1),
    kinds: new Uint8Array(encoded.length),
  };
  let at = 0;
  encoded.forEach((e, s) => {
    mix.tokens.set(e.tokens, at);
    mix.mask.set(e.mask, at);
    at += e.tokens.length;
    mix.offsets[s + 1] = at;
    mix.kinds[s] = DEMO_KINDS.indexOf(demos[order[s]].kind);
  });
  return { mix, order };
}

/** Sequence s of a mix, as views. */
export function mixSequence(
  mix: PretrainMix,
  s: number,
): { tokens: Uint16Array; mask: Uint8Array; kind: (typeof DEMO_KINDS)[number] } {
  const a = mix.offsets[s];
  const b = mix.offsets[s + 1];
  return { tokens: mix.tokens.subarray(a, b), mask: mix.mask.subarray(a, b), kind: DEMO_KINDS[mix.kinds[s]] };
}

export interface MixSummary {
  sequences: number;
  tokens: number;
  targetTokens: number;
  meanLength: number;
  maxLength: number;
  byKind: Record<string, { sequences: number; tokens: number; maxLength: number }>;
}

export function summarizeMix(mix: PretrainMix): MixSummary {
  const n = mix.kinds.length;
  const byKind: MixSummary['byKind'] = {};
  for (const k of DEMO_KINDS) byKind[k] = { sequences: 0, tokens: 0, maxLength: 0 };
  let maxLength = 0;
  for (let s = 0; s < n; s++) {
    const len = mix.offsets[s + 1] - mix.offsets[s];
    const k = byKind[DEMO_KINDS[mix.kinds[s]]];
    k.sequences++;
    k.tokens += len;
    k.maxLength = Math.max(k.maxLength, len);
    maxLength = Math.max(maxLength, len);
  }
  let targetTokens = 0;
  for (let i = 0; i < mix.mask.length; i++) targetTokens += mix.mask[i];
  return {
    sequences: n,
    tokens: mix.tokens.length,
    targetTokens,
    meanLength: n ? Math.round((mix.tokens.length / n) * 100) / 100 : 0,
    maxLength,
    byKind,
  };
}
