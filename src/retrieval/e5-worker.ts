/**
 * Worker thread of the e5 embedder: WordPiece + an onnxruntime session (created by gpu/session.ts,
 * on the device asked for) + mean pooling. Answers `{texts}` with rows [n, H] float32,
 * L2-normalised, batching internally.
 */
import { readFile } from 'node:fs/promises';
import { workerData } from 'node:worker_threads';
import type * as Ort from 'onnxruntime-node';
import { createSession, loadOrt } from '../gpu/session.js';
import { serveWorker } from '../util/worker-rpc.js';
import { type E5WorkerInit, type E5WorkerRequest, meanPoolNormalize, padBatch } from './e5.js';
import { WordPieceTokenizer } from './wordpiece.js';

const init = workerData as E5WorkerInit;

serveWorker<E5WorkerRequest, number>(async () => {
  const ort = await loadOrt();
  const tokenizer = await WordPieceTokenizer.fromFile(init.vocab);
  let session: Ort.InferenceSession;
  try {
    ({ session } = await createSession(await readFile(init.model), {
      device: init.device,
      intraOpThreads: init.threads,
      interOpThreads: 1,
    }));
  } catch (e) {
    throw new Error(`cannot load ONNX model ${init.model}: ${(e as Error).message.split('\n')[0]}`);
  }
  for (const name of ['input_ids', 'attention_mask']) {
    if (!session.inputNames.includes(name))
      throw new Error(
        `ONNX model ${init.model} has no input '${name}' (inputs: ${session.inputNames.join(', ')}); expected a BERT encoder`,
      );
  }
  let dim = 0;

  async function embed(texts: string[]): Promise<Float32Array> {
    const chunks: Float32Array[] = [];
    for (let start = 0; start < texts.length; start += init.batchSize) {
      const ids = texts
        .slice(start, start + init.batchSize)
        .map((t) => tokenizer.encode(t, init.maxLength).ids);
      const b = padBatch(ids, tokenizer.pad);
      const shape = [b.batch, b.seqLen];
      const all: Record<string, Ort.Tensor> = {
        input_ids: new ort.Tensor('int64', b.inputIds, shape),
        attention_mask: new ort.Tensor('int64', b.attentionMask, shape),
        token_type_ids: new ort.Tensor('int64', b.tokenTypeIds, shape),
      };
      // Some exports drop token_type_ids; feed exactly what the model declares.
      const feeds: Record<string, Ort.Tensor> = {};
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

  await embed(['passage: probe']); // learns the hidden size
  return { ready: dim, handle: (m) => embed(m.texts) };
});
