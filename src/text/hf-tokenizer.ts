/**
 * A Hugging Face tokenizer read from a checkpoint directory: `tokenizer.json` (the fast
 * tokenizer: normalizer, pre-tokenizer, BPE/WordPiece/Unigram model, added tokens, decoder) and
 * `tokenizer_config.json` (special tokens, the chat template), plus `generation_config.json` for
 * the end-of-sequence ids when the checkpoint has one.
 *
 * The tokenization itself is @huggingface/tokenizers (pure JS, no native download, the library
 * transformers.js uses); chat templates are rendered by @huggingface/jinja (chat-template.ts).
 * We only add what a trainer needs on top: clear errors naming the file, the special-token ids,
 * the stop ids a sampler must honour, and per-id text pieces for stop-string checks.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { type ChatMessage, ChatTemplate, type ChatTemplateOptions } from './chat-template.js';

export class HfTokenizerFileError extends Error {
  constructor(
    readonly file: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: ${problem}`, options);
    this.name = 'HfTokenizerFileError';
  }
}

/** `tokenizer_config.json`, the fields we read (the rest is passed to the tokenizer as is). */
export interface HfTokenizerConfig {
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  pad_token?: string | { content: string } | null;
  unk_token?: string | { content: string } | null;
  chat_template?: string | Array<{ name: string; template: string }>;
  model_max_length?: number;
  [key: string]: unknown;
}

/** A special token's text: configs write either the string or an AddedToken object. */
function tokenText(v: HfTokenizerConfig['eos_token']): string | null {
  if (v == null) return null;
  return typeof v === 'string' ? v : typeof v.content === 'string' ? v.content : null;
}

async function readText(file: string, required: boolean): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if (!required && (err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new HfTokenizerFileError(
      file,
      `cannot read it (${(err as Error).message}); a Hugging Face checkpoint directory has tokenizer.json and tokenizer_config.json`,
      { cause: err },
    );
  }
}

function parseJson<T>(file: string, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new HfTokenizerFileError(file, `not valid JSON (${(err as Error).message})`, { cause: err });
  }
}

async function readJson<T>(file: string, required: boolean): Promise<T | null> {
  const text = await readText(file, required);
  return text === null ? null : parseJson<T>(file, text);
}

/**
 * The parsed tokenizers of this process, by the sha256 of tokenizer.json's and
 * tokenizer_config.json's text. A process loads the same checkpoint's tokenizer once per role and
 * command (the suite's in-process `akbe train`: seven times), and parsing Qwen3's 11 MB
 * tokenizer.json costs ~3 s each time; the same bytes make the same tokenizer, so one parse
 * serves them all, and a file changed on disk is a new key. Only the last few are kept (a
 * Qwen3 tokenizer is tens of MB in memory).
 */
const PARSED = new Map<string, Tokenizer>();
const PARSED_KEEP = 2;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const parsedKey = (tokenizerJson: string, config: string) => `${sha256(tokenizerJson)}.${sha256(config)}`;

export interface EncodeOptions {
  /** Add the post-processor's special tokens (a BOS for Llama; nothing for Qwen). Default false:
   *  akbe builds prompts with the chat template, which writes the specials itself. */
  addSpecialTokens?: boolean;
}

export interface DecodeOptions {
  /** Drop special tokens (`<|im_end|>`, `<|endoftext|>`); non-special added tokens such as Qwen3's
   *  `<think>` stay. Default false. */
  skipSpecialTokens?: boolean;
}

export class HfTokenizer {
  /** Id of each special token the config names (absent when the config names none). */
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  readonly pad: number | undefined;
  readonly unk: number | undefined;
  /** Ids that end generation: the config's EOS plus generation_config.json's eos_token_id(s). */
  readonly stopIds: readonly number[];
  /** Size of the id space (largest id + 1, added tokens included). */
  readonly vocabSize: number;
  readonly chatTemplate: ChatTemplate | null;
  private piecesCache: string[] | null = null;

  private constructor(
    private readonly tok: Tokenizer,
    readonly config: HfTokenizerConfig,
    generationEos: number[],
    chatTemplate: string | null,
    readonly dir: string,
  ) {
    const id = (v: HfTokenizerConfig['eos_token'], field: string) => {
      const text = tokenText(v);
      if (text === null) return undefined;
      const found = tok.token_to_id(text);
      if (found === undefined)
        throw new HfTokenizerFileError(
          join(dir, 'tokenizer_config.json'),
          `${field} ${JSON.stringify(text)} is not in tokenizer.json's vocabulary`,
        );
      return found;
    };
    this.bos = id(config.bos_token, 'bos_token');
    this.eos = id(config.eos_token, 'eos_token');
    this.pad = id(config.pad_token, 'pad_token');
    this.unk = id(config.unk_token, 'unk_token');
    this.stopIds = [...new Set([...(this.eos === undefined ? [] : [this.eos]), ...generationEos])];
    let max = -1;
    for (const v of tok.get_vocab(true).values()) if (v > max) max = v;
    this.vocabSize = max + 1;
    this.chatTemplate =
      chatTemplate === null
        ? null
        : new ChatTemplate(chatTemplate, {
            bos_token: tokenText(config.bos_token) ?? '',
            eos_token: tokenText(config.eos_token) ?? '',
            pad_token: tokenText(config.pad_token) ?? '',
            unk_token: tokenText(config.unk_token) ?? '',
          });
  }

  /**
   * Reads a checkpoint directory's tokenizer files (tokenizer.json is ~11 MB for Qwen3: ~3 s the
   * first time in a process, then served from PARSED while its bytes are unchanged).
   * `tokenizerJsonText`: tokenizer.json's text when the caller has already read it (and `parsed`,
   * that text parsed, when it has parsed it too).
   */
  static async fromDir(dir: string, tokenizerJsonText?: string, parsed?: object): Promise<HfTokenizer> {
    const jsonFile = join(dir, 'tokenizer.json');
    const configFile = join(dir, 'tokenizer_config.json');
    const jsonText = tokenizerJsonText ?? (await readText(jsonFile, true))!;
    const configText = (await readText(configFile, true))!;
    const config = parseJson<HfTokenizerConfig>(configFile, configText);
    const generation = await readJson<{ eos_token_id?: number | number[] }>(
      join(dir, 'generation_config.json'),
      false,
    );
    // Newer transformers versions save the template beside the config instead of inside it.
    const jinja = await readFile(join(dir, 'chat_template.jinja'), 'utf8').catch(() => null);
    const eosIds = generation?.eos_token_id;
    const key = parsedKey(jsonText, configText);
    let tok = PARSED.get(key);
    if (tok === undefined) {
      const json = parsed ?? parseJson<object>(jsonFile, jsonText);
      try {
        tok = new Tokenizer(json, config);
      } catch (err) {
        throw new HfTokenizerFileError(
          jsonFile,
          `not a tokenizer the @huggingface/tokenizers library can load (${(err as Error).message})`,
          { cause: err },
        );
      }
      PARSED.delete(key);
      PARSED.set(key, tok);
      for (const old of PARSED.keys()) if (PARSED.size > PARSED_KEEP) PARSED.delete(old);
    }
    return new HfTokenizer(
      tok,
      config,
      eosIds === undefined ? [] : Array.isArray(eosIds) ? eosIds : [eosIds],
      jinja ?? pickTemplate(config.chat_template, join(dir, 'tokenizer_config.json')),
      dir,
    );
  }

  encode(text: string, opts: EncodeOptions = {}): number[] {
    return this.tok.encode(text, { add_special_tokens: opts.addSpecialTokens ?? false }).ids;
  }

  decode(ids: readonly number[], opts: DecodeOptions = {}): string {
    return this.tok.decode([...ids], { skip_special_tokens: opts.skipSpecialTokens ?? false });
  }

  tokenToId(token: string): number | undefined {
    return this.tok.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.tok.id_to_token(id);
  }

  /** Whether `id` is a special added token (`<|im_end|>`: yes; Qwen3's `<think>`: no). */
  isSpecial(id: number): boolean {
    return this.tok.get_added_tokens_decoder().get(id)?.special ?? false;
  }

  /**
   * Each id decoded alone. With byte-level BPE a character may span tokens, so pieces do not
   * always concatenate to the text; but an ASCII stop string such as `</search>` is made of whole
   * pieces, which is what a stop-string check over concatenated pieces needs (src/gpu/stop.ts).
   */
  pieces(): string[] {
    if (!this.piecesCache) {
      const out = new Array<string>(this.vocabSize).fill('');
      for (const [, id] of this.tok.get_vocab(true)) out[id] = this.tok.decode([id]);
      this.piecesCache = out;
    }
    return this.piecesCache;
  }

  /** The chat as the model's template renders it (see ChatTemplate.render). */
  renderChat(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): string {
    if (!this.chatTemplate)
      throw new HfTokenizerFileError(
        join(this.dir, 'tokenizer_config.json'),
        'has no chat_template (and there is no chat_template.jinja); use a raw text prompt, or add the template of the model family',
      );
    return this.chatTemplate.render(messages, opts);
  }
}

function pickTemplate(t: HfTokenizerConfig['chat_template'], file: string): string | null {
  if (t === undefined || t === null) return null;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t.find((x) => x?.name === 'default') ?? t[0];
    if (named && typeof named.template === 'string') return named.template;
  }
  throw new HfTokenizerFileError(file, 'chat_template must be a string or a list of {name, template}');
}
