/**
 * The world's word-level tokenizer. Text is cut at whitespace, then punctuation and the pieces of
 * the observation header `Doc i(Title: t)` are split off, so that `Doc 1(Title: Ann Lee) Ann Lee
 * was born in Vemar.` becomes `Doc 1 (Title: Ann Lee ) Ann Lee was born in Vemar .`. Every tag
 * (`<think>`, `</search>`, ...) is one token. Decoding joins tokens with one space, except that a
 * "glue-left" token (`. , ? ! ; : ) (Title:`) follows the previous one directly; so
 * `decode(encode(s)) === s` for every world text, and for any other text up to whitespace
 * (newlines and runs of spaces become one space).
 *
 * Saved as a Hugging Face `tokenizer.json` (WordLevel model, WhitespaceSplit + Split
 * pre-tokenizers, the specials and tags as added tokens), so the checkpoint loads in PyTorch
 * tooling; the HF decoder joins every token with a space (it has no glue rule).
 */
import { readFile, writeFile } from 'node:fs/promises';

export const PAD = '<pad>';
export const BOS = '<bos>';
export const EOS = '<eos>';
export const UNK = '<unk>';
export const TAGS = [
  '<think>',
  '</think>',
  '<search>',
  '</search>',
  '<information>',
  '</information>',
  '<answer>',
  '</answer>',
] as const;
/** Control tokens: never text. */
export const CONTROL = [PAD, BOS, EOS, UNK] as const;
/** Ids 0..11 are fixed: pad, bos, eos, unk, then the eight tags in the order above. */
export const FIXED_TOKENS: readonly string[] = [...CONTROL, ...TAGS];
/** Words every world vocabulary holds, whatever its text: the observation header and doc numbers. */
export const STRUCTURAL_TOKENS = ['Doc', '(Title:', ')', '1', '2', '3', '4', '5', '6', 'yes', 'no'];

const GLUE_LEFT = new Set(['.', ',', '?', '!', ';', ':', ')', '(Title:']);
/** Pieces split out of a whitespace-separated word; the HF Split pre-tokenizer uses the same regex. */
const PIECE_SOURCE = String.raw`<\/?(?:think|search|information|answer|pad|bos|eos|unk)>|\(Title:|[.,?!;:()]`;

export class TokenizerFileError extends Error {
  constructor(
    readonly file: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: ${problem} (expected a tokenizer.json written by \`akbe world build\`)`, options);
    this.name = 'TokenizerFileError';
  }
}

/** Splits text into word-level pieces (the pre-tokenization). */
export function pieces(text: string): string[] {
  const out: string[] = [];
  const re = new RegExp(PIECE_SOURCE, 'g');
  for (const word of text.split(/\s+/)) {
    if (word === '') continue;
    let pos = 0;
    for (const m of word.matchAll(re)) {
      if (m.index > pos) out.push(word.slice(pos, m.index));
      out.push(m[0]);
      pos = m.index + m[0].length;
    }
    if (pos < word.length) out.push(word.slice(pos));
  }
  return out;
}

/** Joins pieces back into text: one space between pieces, none before a glue-left piece. */
export function joinPieces(tokens: readonly string[]): string {
  let s = '';
  for (const t of tokens) s += s === '' || GLUE_LEFT.has(t) ? t : ` ${t}`;
  return s;
}

export class WorldTokenizer {
  private readonly ids = new Map<string, number>();
  readonly pad: number;
  readonly bos: number;
  readonly eos: number;
  readonly unk: number;
  /** Ids of the tags by name, e.g. `tag['</search>']`. */
  readonly tag: Record<(typeof TAGS)[number], number>;

  constructor(readonly vocab: readonly string[]) {
    vocab.forEach((t, i) => {
      if (this.ids.has(t)) throw new RangeError(`tokenizer: duplicate token ${JSON.stringify(t)}`);
      this.ids.set(t, i);
    });
    FIXED_TOKENS.forEach((t, i) => {
      if (vocab[i] !== t)
        throw new RangeError(`tokenizer: id ${i} must be ${t}, got ${JSON.stringify(vocab[i])}`);
    });
    [this.pad, this.bos, this.eos, this.unk] = [0, 1, 2, 3];
    this.tag = Object.fromEntries(TAGS.map((t) => [t, this.ids.get(t)!])) as WorldTokenizer['tag'];
  }

  /** A vocabulary of the fixed tokens, the structural words, then every piece of `texts` (code-point order). */
  static build(texts: Iterable<string>): WorldTokenizer {
    const words = new Set<string>(STRUCTURAL_TOKENS);
    for (const text of texts) for (const p of pieces(text)) words.add(p);
    for (const t of FIXED_TOKENS) words.delete(t);
    const rest = [...words].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return new WorldTokenizer([...FIXED_TOKENS, ...rest]);
  }

  get size(): number {
    return this.vocab.length;
  }

  id(token: string): number {
    return this.ids.get(token) ?? this.unk;
  }

  has(token: string): boolean {
    return this.ids.has(token);
  }

  /** Token ids of a text (no bos/eos added); an unknown word becomes `<unk>`. */
  encode(text: string): number[] {
    return pieces(text).map((p) => this.id(p));
  }

  /** Text of token ids; pad/bos/eos are dropped unless `keepControl`. */
  decode(ids: ArrayLike<number>, opts: { keepControl?: boolean } = {}): string {
    const toks: string[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!opts.keepControl && (id === this.pad || id === this.bos || id === this.eos)) continue;
      const t = this.vocab[id];
      if (t === undefined) throw new RangeError(`tokenizer: id ${id} outside the vocabulary of ${this.size}`);
      toks.push(t);
    }
    return joinPieces(toks);
  }

  /** The Hugging Face tokenizer.json object. */
  toHuggingFace(): HfTokenizerJson {
    return {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: FIXED_TOKENS.map((content, id) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: (CONTROL as readonly string[]).includes(content),
      })),
      normalizer: null,
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'WhitespaceSplit' },
          { type: 'Split', pattern: { Regex: PIECE_SOURCE }, behavior: 'Isolated', invert: false },
        ],
      },
      post_processor: null,
      decoder: null,
      model: {
        type: 'WordLevel',
        vocab: Object.fromEntries(this.vocab.map((t, i) => [t, i])),
        unk_token: UNK,
      },
    };
  }

  static fromHuggingFace(json: unknown, file = 'tokenizer.json'): WorldTokenizer {
    const model = (json as HfTokenizerJson | null)?.model;
    if (model?.type !== 'WordLevel' || typeof model.vocab !== 'object' || model.vocab === null) {
      throw new TokenizerFileError(file, 'no WordLevel model with a vocab');
    }
    const vocab: string[] = [];
    for (const [token, id] of Object.entries(model.vocab)) {
      if (!Number.isInteger(id) || id < 0)
        throw new TokenizerFileError(file, `token ${JSON.stringify(token)} has a bad id ${id}`);
      if (vocab[id] !== undefined) throw new TokenizerFileError(file, `id ${id} is used twice`);
      vocab[id] = token;
    }
    for (let i = 0; i < vocab.length; i++)
      if (vocab[i] === undefined) throw new TokenizerFileError(file, `id ${i} is missing`);
    try {
      return new WorldTokenizer(vocab);
    } catch (e) {
      throw new TokenizerFileError(file, (e as Error).message, { cause: e });
    }
  }

  async save(file: string): Promise<void> {
    await writeFile(file, tokenizerJsonText(this));
  }

  static async load(file: string): Promise<WorldTokenizer> {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      throw new TokenizerFileError(file, 'cannot be read', { cause: e });
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new TokenizerFileError(file, 'is not valid JSON', { cause: e });
    }
    return WorldTokenizer.fromHuggingFace(json, file);
  }
}

/** tokenizer.json text: stable key order, so the same vocabulary gives the same bytes. */
export function tokenizerJsonText(tok: WorldTokenizer): string {
  return `${JSON.stringify(tok.toHuggingFace(), null, 1)}\n`;
}

/** The companion tokenizer_config.json that transformers' PreTrainedTokenizerFast reads. */
export function tokenizerConfigJson(maxLength: number): string {
  const cfg = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: BOS,
    eos_token: EOS,
    pad_token: PAD,
    unk_token: UNK,
    model_max_length: maxLength,
    clean_up_tokenization_spaces: false,
  };
  return `${JSON.stringify(cfg, null, 1)}\n`;
}

export interface HfTokenizerJson {
  version: string;
  truncation: null;
  padding: null;
  added_tokens: Array<{
    id: number;
    content: string;
    single_word: boolean;
    lstrip: boolean;
    rstrip: boolean;
    normalized: boolean;
    special: boolean;
  }>;
  normalizer: null;
  pre_tokenizer: unknown;
  post_processor: null;
  decoder: null;
  model: { type: 'WordLevel'; vocab: Record<string, number>; unk_token: string };
}
