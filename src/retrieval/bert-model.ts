/**
 * A BERT encoder as an ONNX graph, in the shape e5 exports have: inputs input_ids,
 * attention_mask, token_type_ids (int64 [B, T]) and output last_hidden_state (float32 [B, T, H]).
 * Real e5 weights cannot be downloaded here, so tests and the benchmark build one with seeded
 * random weights (`writeBertModel`), which exercises the whole e5 path: tokenizer, ORT session,
 * pooling and index. The same builder takes real weights laid out as `BertWeights`.
 *
 *   x = LN(word[ids] + pos[0:T] + type[tt])                                     [B, T, H]
 *   per layer (post-LN, as BERT):
 *     a = softmax(q k^T / sqrt(d) + (1 - mask) * -10000) v                       [B, nh, T, d]
 *     x = LN(x + a Wo + bo)
 *     x = LN(x + gelu_erf(x W1 + b1) W2 + b2)
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Graph, ops, type Tensor } from '../gpu/graph/index.js';
import { Rng } from '../util/rng.js';

export interface BertConfig {
  vocabSize: number;
  hidden: number;
  layers: number;
  heads: number;
  intermediate: number;
  /** Longest input (e5: 512 positions; Search-R1 uses 256 tokens). */
  maxPositions: number;
  typeVocab: number;
  layerNormEps: number;
}

/** A tiny shape for tests: fast to build and run, every code path still present. */
export const TINY_BERT: Omit<BertConfig, 'vocabSize'> = {
  hidden: 32,
  layers: 2,
  heads: 4,
  intermediate: 64,
  maxPositions: 256,
  typeVocab: 2,
  layerNormEps: 1e-12,
};
/** e5-small-v2's shape (33M parameters with a 30522-token vocab): the benchmark's model. */
export const E5_SMALL_SHAPE: Omit<BertConfig, 'vocabSize'> = {
  hidden: 384,
  layers: 12,
  heads: 12,
  intermediate: 1536,
  maxPositions: 512,
  typeVocab: 2,
  layerNormEps: 1e-12,
};

/** Linear layer: w is [in, out] row-major (x @ w + b). */
export interface Linear {
  w: Float32Array;
  b: Float32Array;
}
export interface LayerNormWeights {
  gamma: Float32Array;
  beta: Float32Array;
}
export interface BertLayer {
  q: Linear;
  k: Linear;
  v: Linear;
  o: Linear;
  ln1: LayerNormWeights;
  ff1: Linear;
  ff2: Linear;
  ln2: LayerNormWeights;
}
export interface BertWeights {
  config: BertConfig;
  word: Float32Array; // [V, H]
  pos: Float32Array; // [P, H]
  type: Float32Array; // [typeVocab, H]
  embLn: LayerNormWeights;
  layers: BertLayer[];
}

/**
 * Seeded random weights. The scale (0.2, larger than BERT's 0.02 init) makes attention far from
 * uniform, so a masking or pooling bug changes the output visibly.
 */
export function randomBertWeights(config: BertConfig, seed: number, scale = 0.2): BertWeights {
  if (config.hidden % config.heads !== 0)
    throw new RangeError(`bert: hidden ${config.hidden} is not a multiple of heads ${config.heads}`);
  const rng = new Rng(seed);
  const normal = (n: number, s = scale) => Float32Array.from({ length: n }, () => s * rng.normal());
  const linear = (i: number, o: number): Linear => ({ w: normal(i * o), b: normal(o, 0.02) });
  const ln = (h: number): LayerNormWeights => ({
    gamma: Float32Array.from({ length: h }, () => 1 + 0.1 * rng.normal()),
    beta: normal(h, 0.05),
  });
  const { hidden: H, intermediate: F } = config;
  return {
    config,
    word: normal(config.vocabSize * H),
    pos: normal(config.maxPositions * H),
    type: normal(config.typeVocab * H),
    embLn: ln(H),
    layers: Array.from({ length: config.layers }, () => ({
      q: linear(H, H),
      k: linear(H, H),
      v: linear(H, H),
      o: linear(H, H),
      ln1: ln(H),
      ff1: linear(H, F),
      ff2: linear(F, H),
      ln2: ln(H),
    })),
  };
}

/** Serialised ONNX ModelProto of the encoder (symbolic batch 'B' and length 'T'). */
export function buildBertOnnx(w: BertWeights): Uint8Array {
  const { hidden: H, heads: nh, layerNormEps: eps } = w.config;
  const d = H / nh;
  const g = new Graph({ name: 'bert' });
  const ids = g.input('input_ids', 'int64', ['B', 'T']);
  const mask = g.input('attention_mask', 'int64', ['B', 'T']);
  const types = g.input('token_type_ids', 'int64', ['B', 'T']);
  const c = (name: string, values: Float32Array, shape: number[]) =>
    g.constant(values, 'float32', shape, name);
  const lin = (x: Tensor, l: Linear, name: string, i: number, o: number) =>
    ops.add(ops.matmul(x, c(`${name}.w`, l.w, [i, o])), c(`${name}.b`, l.b, [o]));
  const norm = (x: Tensor, l: LayerNormWeights, name: string) =>
    ops.layerNorm(x, c(`${name}.gamma`, l.gamma, [H]), c(`${name}.beta`, l.beta, [H]), eps);

  // Embeddings. Positions 0..T-1 are the first T rows of the table: Slice with T from Shape.
  const seqLen = ops.slice(ops.shapeOf(ids), [1], [2], [0]); // int64 [1]
  const pos = g.addNode(
    'Slice',
    [c('pos', w.pos, [w.config.maxPositions, H]), g.ints([0]), seqLen, g.ints([0])],
    {},
    [{ dtype: 'float32', shape: ['T', H] }],
  )[0];
  const emb = ops.add(
    ops.add(ops.gather(c('word', w.word, [w.config.vocabSize, H]), ids), pos),
    ops.gather(c('type', w.type, [w.config.typeVocab, H]), types),
  ); // [B, T, H]
  let x = norm(emb, w.embLn, 'emb_ln');

  // Additive attention bias: 0 on tokens, -10000 on padding (BERT's value).
  const bias = ops.unsqueeze(ops.mul(ops.sub(1, ops.cast(mask, 'float32')), -10000), [1, 2]); // [B, 1, 1, T]
  const heads = (t: Tensor) => ops.transpose(ops.reshape(t, ['B', 'T', nh, d]), [0, 2, 1, 3]); // [B, nh, T, d]
  w.layers.forEach((l, i) => {
    const p = `layer${i}`;
    const q = heads(lin(x, l.q, `${p}.q`, H, H));
    const k = heads(lin(x, l.k, `${p}.k`, H, H));
    const v = heads(lin(x, l.v, `${p}.v`, H, H));
    const scores = ops.add(ops.mul(ops.matmul(q, ops.transpose(k, [0, 1, 3, 2])), 1 / Math.sqrt(d)), bias); // [B, nh, T, T]
    const ctx = ops.reshape(ops.transpose(ops.matmul(ops.softmax(scores, -1), v), [0, 2, 1, 3]), [
      'B',
      'T',
      H,
    ]); // [B, T, H]
    x = norm(ops.add(x, lin(ctx, l.o, `${p}.o`, H, H)), l.ln1, `${p}.ln1`);
    const ff = lin(
      ops.gelu(lin(x, l.ff1, `${p}.ff1`, H, w.config.intermediate), 'erf'),
      l.ff2,
      `${p}.ff2`,
      w.config.intermediate,
      H,
    );
    x = norm(ops.add(x, ff), l.ln2, `${p}.ln2`);
  });
  g.output(x, 'last_hidden_state');
  return g.serialize();
}

/**
 * A WordPiece vocab for a test model: specials, single characters and their `##` forms (so
 * every lowercase ASCII word has a segmentation), whole words from `words`, a few common
 * suffixes, then `[unusedN]` fillers up to `size` when given.
 */
export function buildTestVocab(words: Iterable<string>, size?: number): string[] {
  const vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
  const seen = new Set(vocab);
  const push = (t: string) => {
    if (!seen.has(t)) {
      seen.add(t);
      vocab.push(t);
    }
  };
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789';
  for (const ch of `${chars}!"#$%&'()*+,-./:;<=>?@[\\]^_\`{|}~`) push(ch);
  for (const ch of chars) push(`##${ch}`);
  for (const s of ['##s', '##ed', '##ing', '##er', '##ly', '##tion']) push(s);
  for (const word of words) push(word);
  if (size !== undefined) for (let i = 0; vocab.length < size; i++) push(`[unused${i}]`);
  return vocab;
}

/** Writes `model.onnx` and `vocab.txt` into `dir`; returns their paths and the weights. */
export async function writeBertModel(
  dir: string,
  opts: {
    shape?: Omit<BertConfig, 'vocabSize'>;
    words?: Iterable<string>;
    vocabSize?: number;
    seed?: number;
    scale?: number;
  } = {},
): Promise<{ model: string; vocab: string; weights: BertWeights; tokens: string[] }> {
  const tokens = buildTestVocab(opts.words ?? [], opts.vocabSize);
  const weights = randomBertWeights(
    { ...(opts.shape ?? TINY_BERT), vocabSize: tokens.length },
    opts.seed ?? 1,
    opts.scale,
  );
  await mkdir(dir, { recursive: true });
  const model = join(dir, 'model.onnx');
  const vocab = join(dir, 'vocab.txt');
  await writeFile(model, buildBertOnnx(weights));
  await writeFile(vocab, `${tokens.join('\n')}\n`);
  return { model, vocab, weights, tokens };
}
