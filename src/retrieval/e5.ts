/**
 * The e5 embedder (intfloat/e5-base-v2 as used by Search-R1): WordPiece ids with the
 * `query: ` / `passage: ` prefixes, a BERT encoder in ONNX (input_ids, attention_mask,
 * token_type_ids: int64 [B, T] -> last_hidden_state: float32 [B, T, H]), mean pooling over the
 * attention mask, L2 normalisation. Tokenization and onnxruntime run in a worker thread
 * (e5-worker.ts), since session.run blocks.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { resolve } from 'node:path';
import type { DeviceChoice } from '../gpu/session.js';
import { WorkerClient } from '../util/worker-rpc.js';
import type { Embedder } from './embedder.js';

export const E5_QUERY_PREFIX = 'query: ';
export const E5_PASSAGE_PREFIX = 'passage: ';
export const E5_MAX_LENGTH = 256;

export interface E5Options {
  /** ONNX file of a BERT encoder. */
  model: string;
  /** vocab.txt or tokenizer.json. */
  vocab: string;
  /** Tokens per text including [CLS]/[SEP] (e5 and Search-R1 use 256). */
  maxLength?: number;
  /** Texts per session.run; each batch is padded to its longest member. */
  batchSize?: number;
  /** onnxruntime intra-op threads (default 1: the machine is shared with the trainer). */
  threads?: number;
  /** Where the encoder runs (gpu/session.ts's choice; default cpu). */
  device?: DeviceChoice;
}

/** One padded batch: int64 [B, T] inputs, row-major. */
export interface E5Batch {
  batch: number;
  seqLen: number;
  inputIds: BigInt64Array;
  attentionMask: BigInt64Array;
  tokenTypeIds: BigInt64Array;
}

/** Pads id lists to the longest one (pad id, mask 0); token types are all 0 (one segment). */
export function padBatch(idLists: number[][], padId: number): E5Batch {
  const batch = idLists.length;
  const seqLen = Math.max(1, ...idLists.map((ids) => ids.length));
  const inputIds = new BigInt64Array(batch * seqLen).fill(BigInt(padId));
  const attentionMask = new BigInt64Array(batch * seqLen);
  idLists.forEach((ids, b) => {
    ids.forEach((id, t) => {
      inputIds[b * seqLen + t] = BigInt(id);
      attentionMask[b * seqLen + t] = 1n;
    });
  });
  return { batch, seqLen, inputIds, attentionMask, tokenTypeIds: new BigInt64Array(batch * seqLen) };
}

/**
 * Mean over the unmasked positions, then L2 normalisation.
 * hidden: [B, T, H], mask: [B, T] (1 = token, 0 = pad) -> out: [B, H]
 */
export function meanPoolNormalize(
  hidden: Float32Array,
  mask: BigInt64Array,
  batch: number,
  seqLen: number,
  dim: number,
): Float32Array {
  const out = new Float32Array(batch * dim);
  const acc = new Float64Array(dim);
  for (let b = 0; b < batch; b++) {
    acc.fill(0);
    let count = 0;
    for (let t = 0; t < seqLen; t++) {
      if (mask[b * seqLen + t] === 0n) continue;
      count++;
      const base = (b * seqLen + t) * dim;
      for (let h = 0; h < dim; h++) acc[h] += hidden[base + h];
    }
    let ss = 0;
    for (let h = 0; h < dim; h++) {
      acc[h] /= Math.max(count, 1e-9); // e5 clamps the token count the same way
      ss += acc[h] * acc[h];
    }
    const inv = ss > 0 ? 1 / Math.sqrt(ss) : 0;
    for (let h = 0; h < dim; h++) out[b * dim + h] = acc[h] * inv;
  }
  return out;
}

/** sha256 of a file, first 12 hex digits (for the fingerprint). */
export async function fileDigest(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex').slice(0, 12);
}

export class E5Error extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'E5Error';
  }
}

/** A request to e5-worker.ts: texts (prefixes applied) -> rows [n, H] float32, L2-normalised. */
export type E5WorkerRequest = { texts: string[] };
export type E5WorkerInit = {
  model: string;
  vocab: string;
  maxLength: number;
  batchSize: number;
  threads: number;
  device: DeviceChoice;
};

export class E5Embedder implements Embedder {
  readonly name = 'e5';

  private constructor(
    private readonly worker: WorkerClient<E5WorkerRequest>,
    readonly dim: number,
    readonly fingerprint: string,
  ) {}

  /** Starts the worker, loads tokenizer and model, and learns the hidden size. */
  static async create(opts: E5Options): Promise<E5Embedder> {
    const init: E5WorkerInit = {
      model: resolve(opts.model),
      vocab: resolve(opts.vocab),
      maxLength: opts.maxLength ?? E5_MAX_LENGTH,
      batchSize: opts.batchSize ?? 32,
      threads: opts.threads ?? 1,
      device: opts.device ?? 'cpu',
    };
    const [modelDigest, vocabDigest] = await Promise.all([
      fileDigest(init.model).catch((e) => {
        throw new E5Error(`cannot read --model ${opts.model}: ${(e as Error).message}`, { cause: e });
      }),
      fileDigest(init.vocab).catch((e) => {
        throw new E5Error(`cannot read --vocab ${opts.vocab}: ${(e as Error).message}`, { cause: e });
      }),
    ]);
    const { client, ready: dim } = await WorkerClient.start<E5WorkerRequest, number>(
      import.meta.url,
      'e5-worker',
      init,
      {
        failure: (why, cause) => new E5Error(`e5 worker ${why}`, { cause }),
        remote: (e) => new E5Error(e.message),
      },
    );
    const fingerprint = `e5(model=${modelDigest},vocab=${vocabDigest},maxLen=${init.maxLength},dim=${dim},pool=mean)`;
    return new E5Embedder(client, dim, fingerprint);
  }

  embedQueries(texts: string[]): Promise<Float32Array[]> {
    return this.embedRaw(texts.map((t) => E5_QUERY_PREFIX + t));
  }

  embedPassages(texts: string[]): Promise<Float32Array[]> {
    return this.embedRaw(texts.map((t) => E5_PASSAGE_PREFIX + t));
  }

  /** Embeds texts exactly as given (prefixes already applied). */
  async embedRaw(texts: string[]): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    const flat = await this.worker.call<Float32Array>({ texts });
    const rows: Float32Array[] = [];
    for (let i = 0; i < texts.length; i++) rows.push(flat.slice(i * this.dim, (i + 1) * this.dim));
    return rows;
  }

  close(): Promise<void> {
    return this.worker.close();
  }
}
