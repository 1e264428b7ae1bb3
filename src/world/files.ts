/**
 * A world on disk. `worldFiles` renders every file as bytes (so tests can hash them without
 * touching the disk); `writeWorld` writes them; the readers load what `akbe pretrain` and
 * `akbe eval` need. No file holds a time or a path, so the same seed gives the same bytes.
 *
 *   DIR/world.json                summary: config, sizes, per-split counts, mix statistics, digests
 *   DIR/corpus.jsonl              Search-R1 passages {"id","contents"}
 *   DIR/questions/{train,dev,test}.jsonl
 *                                 {"id","question","golden_answers","hop","kind","known","facts","entities","evidence"}
 *   DIR/entities.jsonl, facts.jsonl   the world graph (roles, splits, popularity, repetitions)
 *   DIR/tokenizer.json, tokenizer_config.json   Hugging Face WordLevel tokenizer
 *   DIR/pretrain/{tokens.u16,mask.u8,offsets.u32,kinds.u8}   the mix, little-endian (pretrain-data.ts)
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { tokenizerConfigJson, tokenizerJsonText, WorldTokenizer } from '../text/word-tokenizer.js';
import { corpusJsonl } from './corpus.js';
import { DEMO_KINDS } from './demos.js';
import { SPLITS, type Split } from './entities.js';
import type { World } from './generate.js';
import type { PretrainMix } from './pretrain-data.js';
import { summarizeMix } from './pretrain-data.js';
import type { WorldQuestion } from './questions.js';
import { RELATION_SPECS } from './relations.js';

export const WORLD_FORMAT = 'akbe-world/1';
export const WORLD_JSON = 'world.json';

export class WorldDirError extends Error {
  constructor(
    readonly path: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(`${path}: ${problem} (build a world with \`akbe world build --seed N --out DIR\`)`, options);
    this.name = 'WorldDirError';
  }
}

/** Every file of the world, path relative to the world dir -> bytes, in a fixed order. */
export function worldFiles(world: World): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  const text = (s: string) => new TextEncoder().encode(s);
  files.set('corpus.jsonl', text(corpusJsonl(world.passages)));
  for (const split of SPLITS) files.set(`questions/${split}.jsonl`, text(questionsJsonl(world, split)));
  files.set('entities.jsonl', text(world.index.graph.entities.map((e) => `${JSON.stringify(e)}\n`).join('')));
  files.set(
    'facts.jsonl',
    text(
      world.index.graph.facts
        .map((f) => `${JSON.stringify({ ...f, sentence: world.index.sentence(f) })}\n`)
        .join(''),
    ),
  );
  files.set('tokenizer.json', text(tokenizerJsonText(world.tokenizer)));
  files.set('tokenizer_config.json', text(tokenizerConfigJson(world.config.mix.maxSequenceTokens)));
  const m = world.mix;
  files.set('pretrain/tokens.u16', le(m.tokens));
  files.set('pretrain/mask.u8', m.mask);
  files.set('pretrain/offsets.u32', le(m.offsets));
  files.set('pretrain/kinds.u8', m.kinds);
  const digests: Record<string, string> = {};
  for (const [path, bytes] of files) digests[path] = createHash('sha256').update(bytes).digest('hex');
  files.set(WORLD_JSON, text(`${JSON.stringify(worldSummary(world, digests), null, 1)}\n`));
  return files;
}

export async function writeWorld(
  world: World,
  dir: string,
  onFile?: (path: string, bytes: number) => void,
): Promise<void> {
  for (const [path, bytes] of worldFiles(world)) {
    const full = join(dir, path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, bytes);
    onFile?.(path, bytes.byteLength);
  }
}

function questionsJsonl(world: World, split: Split): string {
  return world.questions
    .filter((q) => q.split === split)
    .map((q) => {
      const evidence = q.facts.map((id) => world.index.sentence(world.index.factById.get(id)!));
      return `${JSON.stringify({ ...q, evidence })}\n`;
    })
    .join('');
}

export function worldSummary(world: World, digests: Record<string, string>) {
  const g = world.index.graph;
  const count = <T>(items: readonly T[], key: (t: T) => string) => {
    const out: Record<string, number> = {};
    for (const it of items) out[key(it)] = (out[key(it)] ?? 0) + 1;
    return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
  };
  return {
    format: WORLD_FORMAT,
    seed: world.config.seed,
    config: world.config,
    entities: { total: g.entities.length, byTypeRole: count(g.entities, (e) => `${e.type}/${e.role}`) },
    facts: {
      total: g.facts.length,
      known: g.facts.filter((f) => f.repeats > 0).length,
      byRelation: count(g.facts, (f) => f.relation),
    },
    passages: world.passages.length,
    questions: count(world.questions, (q) => `${q.split}/${q.hop}/${q.known ? 'known' : 'unknown'}`),
    relations: Object.keys(RELATION_SPECS),
    vocabSize: world.tokenizer.size,
    mix: { ...summarizeMix(world.mix), kinds: DEMO_KINDS, ...world.demoStats },
    digests,
  };
}

/** Little-endian bytes of a typed array (every supported platform is little-endian; say so anyway). */
function le(a: Uint16Array | Uint32Array): Uint8Array {
  const out = new Uint8Array(a.byteLength);
  const view = new DataView(out.buffer);
  const width = a.BYTES_PER_ELEMENT;
  for (let i = 0; i < a.length; i++) {
    if (width === 2) view.setUint16(i * 2, a[i], true);
    else view.setUint32(i * 4, a[i], true);
  }
  return out;
}

// ---- readers -------------------------------------------------------------------------------

async function readBytes(dir: string, path: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(join(dir, path)));
  } catch (e) {
    throw new WorldDirError(join(dir, path), 'cannot be read', { cause: e });
  }
}

export async function readWorldSummary(dir: string): Promise<ReturnType<typeof worldSummary>> {
  const bytes = await readBytes(dir, WORLD_JSON);
  const json = JSON.parse(new TextDecoder().decode(bytes));
  if (json?.format !== WORLD_FORMAT)
    throw new WorldDirError(join(dir, WORLD_JSON), `format is ${json?.format}, expected ${WORLD_FORMAT}`);
  return json;
}

export async function readWorldTokenizer(dir: string): Promise<WorldTokenizer> {
  return WorldTokenizer.load(join(dir, 'tokenizer.json'));
}

export async function readQuestions(dir: string, split: Split): Promise<WorldQuestion[]> {
  const text = new TextDecoder().decode(await readBytes(dir, `questions/${split}.jsonl`));
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, i) => {
      try {
        return JSON.parse(l) as WorldQuestion;
      } catch (e) {
        throw new WorldDirError(join(dir, `questions/${split}.jsonl`), `line ${i + 1} is not valid JSON`, {
          cause: e,
        });
      }
    });
}

export async function readPretrainMix(dir: string): Promise<PretrainMix> {
  const tokensB = await readBytes(dir, 'pretrain/tokens.u16');
  const offsetsB = await readBytes(dir, 'pretrain/offsets.u32');
  const tokens = new Uint16Array(tokensB.byteLength / 2);
  const tv = new DataView(tokensB.buffer, tokensB.byteOffset, tokensB.byteLength);
  for (let i = 0; i < tokens.length; i++) tokens[i] = tv.getUint16(i * 2, true);
  const offsets = new Uint32Array(offsetsB.byteLength / 4);
  const ov = new DataView(offsetsB.buffer, offsetsB.byteOffset, offsetsB.byteLength);
  for (let i = 0; i < offsets.length; i++) offsets[i] = ov.getUint32(i * 4, true);
  const mask = await readBytes(dir, 'pretrain/mask.u8');
  const kinds = await readBytes(dir, 'pretrain/kinds.u8');
  if (
    mask.length !== tokens.length ||
    offsets[offsets.length - 1] !== tokens.length ||
    kinds.length !== offsets.length - 1
  ) {
    throw new WorldDirError(join(dir, 'pretrain'), 'tokens, mask, offsets and kinds disagree in length');
  }
  return { tokens, mask, offsets, kinds };
}
