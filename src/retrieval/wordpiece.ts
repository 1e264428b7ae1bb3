/**
 * BERT WordPiece tokenization (as in BERT's tokenization.py / Hugging Face BertTokenizer, which
 * e5-base-v2 uses), for `[CLS] tokens [SEP]` input ids:
 *
 *   basic:     drop NUL/U+FFFD/control chars, whitespace -> ' ', space out CJK ideographs,
 *              split on whitespace, lowercase + strip accents (NFD, drop Mn), split punctuation
 *   wordpiece: greedy longest-match-first against the vocab, continuation pieces prefixed `##`;
 *              a word with no full segmentation (or > 100 chars) becomes [UNK]
 *
 * The vocab comes from a vocab.txt (one token per line, id = line number) or from a
 * tokenizer.json whose model is WordPiece.
 */
import { readFile } from 'node:fs/promises';

export class VocabFormatError extends Error {
  constructor(
    readonly file: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(
      `${file}: ${problem} (expected a BERT vocab.txt or a tokenizer.json with a WordPiece model)`,
      options,
    );
    this.name = 'VocabFormatError';
  }
}

export interface WordPieceOptions {
  /** Uncased models (e5, bert-base-uncased) lowercase and strip accents. */
  lowercase?: boolean;
  /** Words longer than this (in code points) become [UNK], as in BERT. */
  maxCharsPerWord?: number;
}

export interface Encoded {
  /** `[CLS] ... [SEP]`, at most maxLength ids. */
  ids: number[];
}

export class WordPieceTokenizer {
  readonly cls: number;
  readonly sep: number;
  readonly unk: number;
  readonly pad: number;
  private readonly lowercase: boolean;
  private readonly maxCharsPerWord: number;

  constructor(
    readonly vocab: ReadonlyMap<string, number>,
    opts: WordPieceOptions = {},
  ) {
    this.lowercase = opts.lowercase ?? true;
    this.maxCharsPerWord = opts.maxCharsPerWord ?? 100;
    const need = (t: string) => {
      const id = vocab.get(t);
      if (id === undefined) throw new RangeError(`WordPiece vocab lacks the special token ${t}`);
      return id;
    };
    this.cls = need('[CLS]');
    this.sep = need('[SEP]');
    this.unk = need('[UNK]');
    this.pad = vocab.get('[PAD]') ?? 0;
  }

  /** Loads vocab.txt or tokenizer.json (chosen by content, not by name). */
  static async fromFile(file: string, opts: WordPieceOptions = {}): Promise<WordPieceTokenizer> {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      throw new VocabFormatError(file, `cannot read (${(e as Error).message})`, { cause: e });
    }
    return WordPieceTokenizer.fromText(text, file, opts);
  }

  static fromText(text: string, file = '<vocab>', opts: WordPieceOptions = {}): WordPieceTokenizer {
    const vocab = new Map<string, number>();
    if (text.trimStart().startsWith('{')) {
      let json: {
        model?: { type?: string; vocab?: Record<string, number> };
        normalizer?: { lowercase?: boolean };
      };
      try {
        json = JSON.parse(text);
      } catch (e) {
        throw new VocabFormatError(file, 'invalid JSON', { cause: e });
      }
      if (json.model?.type !== 'WordPiece' || typeof json.model.vocab !== 'object')
        throw new VocabFormatError(file, `model.type is '${json.model?.type}', not WordPiece`);
      for (const [tok, id] of Object.entries(json.model.vocab)) vocab.set(tok, id);
      opts = { lowercase: json.normalizer?.lowercase ?? true, ...opts };
    } else {
      const lines = text.split('\n');
      if (lines.at(-1) === '') lines.pop();
      lines.forEach((line, i) => {
        const tok = line.replace(/\r$/, '');
        if (!vocab.has(tok)) vocab.set(tok, i);
      });
    }
    try {
      return new WordPieceTokenizer(vocab, opts);
    } catch (e) {
      throw new VocabFormatError(file, (e as Error).message, { cause: e });
    }
  }

  /** Basic tokenization: the words and punctuation marks WordPiece then splits. */
  basicTokens(text: string): string[] {
    let clean = '';
    for (const ch of text) {
      const cp = ch.codePointAt(0)!;
      if (cp === 0 || cp === 0xfffd || isControl(ch)) continue;
      if (isWhitespace(ch)) clean += ' ';
      else if (isCjk(cp)) clean += ` ${ch} `;
      else clean += ch;
    }
    const out: string[] = [];
    for (let word of clean.split(' ')) {
      if (word === '') continue;
      if (this.lowercase)
        word = word
          .toLowerCase()
          .normalize('NFD')
          .replace(/\p{Mn}/gu, '');
      let current = '';
      for (const ch of word) {
        if (isPunctuation(ch)) {
          if (current) out.push(current);
          out.push(ch);
          current = '';
        } else current += ch;
      }
      if (current) out.push(current);
    }
    return out;
  }

  /** WordPiece ids of one word (greedy longest match first). */
  wordIds(word: string): number[] {
    const chars = Array.from(word);
    if (chars.length > this.maxCharsPerWord) return [this.unk];
    const ids: number[] = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let found = -1;
      while (start < end) {
        const piece = (start > 0 ? '##' : '') + chars.slice(start, end).join('');
        const id = this.vocab.get(piece);
        if (id !== undefined) {
          found = id;
          break;
        }
        end--;
      }
      if (found < 0) return [this.unk];
      ids.push(found);
      start = end;
    }
    return ids;
  }

  /** `[CLS] pieces [SEP]`, truncating the pieces so the whole fits in `maxLength`. */
  encode(text: string, maxLength = 256): Encoded {
    const ids = [this.cls];
    const room = maxLength - 2;
    outer: for (const word of this.basicTokens(text)) {
      for (const id of this.wordIds(word)) {
        if (ids.length - 1 >= room) break outer;
        ids.push(id);
      }
    }
    ids.push(this.sep);
    return { ids };
  }
}

function isWhitespace(ch: string): boolean {
  return ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r' || /^\p{Zs}$/u.test(ch);
}

/** Control characters other than the whitespace ones (BERT: categories Cc and Cf). */
function isControl(ch: string): boolean {
  if (ch === '\t' || ch === '\n' || ch === '\r') return false;
  return /^[\p{Cc}\p{Cf}]$/u.test(ch);
}

/** ASCII non-alphanumeric symbols count as punctuation too (`$`, `^`, `` ` ``), as in BERT. */
function isPunctuation(ch: string): boolean {
  const cp = ch.codePointAt(0)!;
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  return /^\p{P}$/u.test(ch);
}

/** The CJK Unified Ideograph blocks BERT splits character by character. */
function isCjk(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b820 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}
