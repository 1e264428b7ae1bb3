/**
 * Generates a whole synthetic knowledge world from a config (seed included): entities and facts,
 * the passage corpus, the question sets with their oracle `known` labels, the tokenizer and the
 * pretraining mix. Pure and deterministic: the same config gives the same world, byte for byte
 * once serialised (files.ts). Every random draw comes from an `Rng` seeded by
 * `deriveSeed(seed, <stage name>, ...)`, so changing one stage leaves the others' draws alone.
 */

import { INSTRUCTIONS, THINK } from '../text/prompts.js';
import { WorldTokenizer } from '../text/word-tokenizer.js';
import { validateWorldConfig, type WorldConfig } from './config.js';
import { buildCorpus, type WorldPassage } from './corpus.js';
import type { Demo } from './demos.js';
import { generateEntities, WorldIndex } from './entities.js';
import { buildDemos, type DemoStats, demoTexts, encodeMix, type PretrainMix } from './pretrain-data.js';
import { generateQuestions, type WorldQuestion } from './questions.js';

export interface World {
  config: WorldConfig;
  index: WorldIndex;
  passages: WorldPassage[];
  /** Questions of all splits plus the demonstration pool (`split: 'demo'`). */
  questions: WorldQuestion[];
  tokenizer: WorldTokenizer;
  /** Demonstrations in generation order; `mix` holds them tokenized in `mixOrder`. */
  demos: Demo[];
  mix: PretrainMix;
  mixOrder: number[];
  demoStats: DemoStats;
}

export interface GenerateOptions {
  /** Called between stages, for progress lines. */
  onStage?: (stage: string) => void;
}

export function generateWorld(config: WorldConfig, opts: GenerateOptions = {}): World {
  validateWorldConfig(config);
  const stage = opts.onStage ?? (() => {});
  stage('entities and facts');
  const index = new WorldIndex(generateEntities(config));
  stage('corpus');
  const passages = buildCorpus(index, config);
  stage('questions');
  const questions = generateQuestions(index, config);
  stage('demonstrations');
  const { demos, stats } = buildDemos(index, passages, questions, config);
  stage('tokenizer');
  const tokenizer = WorldTokenizer.build(worldTexts(passages, questions, demos));
  stage('pretraining mix');
  const { mix, order } = encodeMix(tokenizer, demos, config.seed);
  return { config, index, passages, questions, tokenizer, demos, mix, mixOrder: order, demoStats: stats };
}

function* worldTexts(
  passages: readonly WorldPassage[],
  questions: readonly WorldQuestion[],
  demos: readonly Demo[],
): Generator<string> {
  yield* Object.values(INSTRUCTIONS);
  yield* Object.values(THINK);
  for (const p of passages) yield p.contents;
  for (const q of questions) {
    yield q.question;
    yield* q.golden_answers;
  }
  yield* demoTexts(demos);
}
