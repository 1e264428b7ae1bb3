/**
 * Worker thread of the e5 embedder: WordPiece + onnxruntime session + mean pooling. Replies to
 * `{id, texts}` with `{id, rows}` (rows: [n, H] float32, L2-normalised), batching internally.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import {
  type E5WorkerInit,
  type E5WorkerReply,
  type E5WorkerRequest,
  meanPoolNormalize,
  padBatch,
} from './e5.js';
import { WordPieceTokenizer } from './wordpiece.js';

const init = workerData as E5WorkerInit;
const port = parentPort!;

let tokenizer: WordPieceTokenizer;
let session: ort.InferenceSession;
let dim = 0;

async function embed(texts: string[]): Promise<Float32Array> {
  const chunks: Float32Array[] = [];
  for (let start = 0; start < texts.length; start += init.batchSize) {
    const ids = texts
      .slice(start, start + init.batchSize)
      .map((t) => tokenizer.encode(t, init.maxLength).ids);
    const b = padBatch(ids, tokenizer.pad);
    const shape = [b.batch, b.seqLen];
    const all: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', b.inputIds, shape),
      attention_mask: new ort.Tensor('int64', b.attentionMask, shape),
      token_type_ids: new ort.Tensor('int64', b.tokenTypeIds, shape),
    };
    // Some exports drop token_type_ids; feed exactly what the model declares.
    const feeds: Record<string, ort.Tensor> = {};
    for (const name of session.inputNames) feeds[name] = all[name];
    const outputs = await session.run(feeds);
    const hidden = outputs.last_hidden_state ?? outputs[session.outputNames[0]];
    const h = hidden.dims[2];
    if (dim === 0) dim = h;
    chunks.push(meanPoolNormalize(hidden.data as Float32Array, b.attentionMask, b.batch, b.seqLen, h));
    for (const t of Object.values(outputs)) t.dispose?.();
  }
  const out = new Float32Array(texts.length * dim);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

async function start(): Promise<void> {
  tokenizer = await WordPieceTokenizer.fromFile(init.vocab);
  try {
    session = await ort.InferenceSession.create(init.model, {
      intraOpNumThreads: init.threads,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
      // Spinning threads burn a core while idle; this machine is shared with the trainer.
      extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
    });
  } catch (e) {
    throw new Error(`cannot load ONNX model ${init.model}: ${(e as Error).message.split('\n')[0]}`);
  }
  for (const name of ['input_ids', 'attention_mask']) {
    if (!session.inputNames.includes(name))
      throw new Error(
        `ONNX model ${init.model} has no input '${name}' (inputs: ${session.inputNames.join(', ')}); expected a BERT encoder`,
      );
  }
  await embed(['passage: probe']); // learns the hidden size
}

start().then(
  () => {
    port.postMessage({ ready: dim });
    port.on('message', (m: E5WorkerRequest) => {
      embed(m.texts).then(
        (rows) => port.postMessage({ id: m.id, rows } satisfies E5WorkerReply, [rows.buffer as ArrayBuffer]),
        (e) => port.postMessage({ id: m.id, error: (e as Error).message } satisfies E5WorkerReply),
      );
    });
  },
  (e) => port.postMessage({ error: (e as Error).message }),
);
