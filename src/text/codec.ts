/**
 * What a serving or rollout layer needs from a tokenizer, whichever family it is: text to ids,
 * ids to text, the ids that end generation, and per-id text pieces for stop-string checks.
 * Two implementations: a Hugging Face checkpoint's tokenizer (HfTokenizer: Qwen, Llama, …) and
 * the synthetic world's word-level tokenizer (exact decode of world text; its checkpoints carry a
 * WordLevel tokenizer.json written by `akbe world build`).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HfTokenizer } from './hf-tokenizer.js';
import { WorldTokenizer } from './word-tokenizer.js';

export interface TextCodec {
  /** 'hf' (tokenizer.json via @huggingface/tokenizers) or 'world' (akbe's word-level tokenizer). */
  readonly kind: 'hf' | 'world';
  readonly vocabSize: number;
  /** Ids that end generation (EOS and friends). */
  readonly stopIds: readonly number[];
  /** Padding id for batches (EOS when the tokenizer names no pad token). */
  readonly padId: number;
  encode(text: string): number[];
  /** Text of ids; special/control tokens are dropped when `skipSpecialTokens`. */
  decode(ids: readonly number[], opts?: { skipSpecialTokens?: boolean }): string;
  /** Token id -> text piece, for stop-string checks over concatenated pieces. */
  pieces(): string[];
}

/** The world tokenizer as a TextCodec. Its pieces carry the joining space, so `</search>` is found. */
export function worldCodec(tok: WorldTokenizer): TextCodec {
  let pieces: string[] | null = null;
  return {
    kind: 'world',
    vocabSize: tok.size,
    stopIds: [tok.eos],
    padId: tok.pad,
    encode: (text) => tok.encode(text),
    decode: (ids, opts) => tok.decode(ids, { keepControl: !opts?.skipSpecialTokens }),
    pieces: () => {
      pieces ??= tok.vocab.map((t) => ` ${t}`);
      return pieces;
    },
  };
}

/** A Hugging Face tokenizer as a TextCodec. */
export function hfCodec(tok: HfTokenizer): TextCodec {
  const pad = tok.pad ?? tok.eos;
  if (pad === undefined)
    throw new Error(`${tok.dir}: tokenizer_config.json names neither pad_token nor eos_token`);
  return {
    kind: 'hf',
    vocabSize: tok.vocabSize,
    stopIds: tok.stopIds,
    padId: pad,
    encode: (text) => tok.encode(text),
    decode: (ids, opts) => tok.decode(ids, opts),
    pieces: () => tok.pieces(),
  };
}

export type CheckpointTokenizer = { kind: 'world'; tok: WorldTokenizer } | { kind: 'hf'; tok: HfTokenizer };

/**
 * The tokenizer of a checkpoint directory: the world's word-level tokenizer when tokenizer.json
 * is akbe's WordLevel vocabulary, else a Hugging Face tokenizer (tokenizer.json + tokenizer_config.json).
 */
export async function readCheckpointTokenizer(dir: string): Promise<CheckpointTokenizer> {
  const file = join(dir, 'tokenizer.json');
  const text = await readFile(file, 'utf8').catch(() => undefined);
  // HfTokenizer.fromDir names the file and the problem when it cannot be read or parsed.
  const digest = text === undefined ? '' : createHash('sha256').update(text).digest('hex');
  let json: { model?: { type?: string } } | null = null;
  if (text !== undefined && !NOT_WORLD.has(digest)) {
    try {
      json = JSON.parse(text);
    } catch {}
  }
  if (json?.model?.type === 'WordLevel') {
    try {
      return { kind: 'world', tok: WorldTokenizer.fromHuggingFace(json, file) };
    } catch {
      // a WordLevel tokenizer that is not the world's: the generic loader takes it
    }
  }
  const tok = await HfTokenizer.fromDir(dir, text, json ?? undefined);
  NOT_WORLD.add(digest);
  return { kind: 'hf', tok };
}

/**
 * The sha256 of tokenizer.json texts this process found to be no world tokenizer: their next load
 * skips the parse that tells (0.8 s for Qwen3's 11 MB; HfTokenizer keeps the parsed tokenizer).
 */
const NOT_WORLD = new Set<string>();

/** A checkpoint directory's tokenizer as a TextCodec. */
export async function loadTextCodec(dir: string): Promise<TextCodec> {
  const t = await readCheckpointTokenizer(dir);
  return t.kind === 'world' ? worldCodec(t.tok) : hfCodec(t.tok);
}
