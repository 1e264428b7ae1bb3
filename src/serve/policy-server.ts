/**
 * A checkpoint directory served over the OpenAI-compatible API: the checkpoint's tokenizer
 * (loadTextCodec), its policy in a worker thread (PolicyHost, whose batcher decodes concurrent
 * requests together and checks stop strings on the tokenizer's pieces) and the HTTP server.
 */
import { basename, resolve } from 'node:path';
import { checkpointLimits } from '../gpu/checkpoint.js';
import type { WeightsDtype } from '../gpu/model-inputs.js';
import { PolicyHost } from '../gpu/policy-host.js';
import type { DeviceChoice } from '../gpu/session.js';
import { loadTextCodec } from '../text/codec.js';
import { OpenAIServer, type OpenAIServerOptions } from './openai-server.js';

export interface ServeCheckpointOptions
  extends Pick<
    OpenAIServerOptions,
    'port' | 'host' | 'apiKey' | 'allowWeightUpdates' | 'maxChoices' | 'log' | 'allowHosts'
  > {
  checkpoint: string;
  /** Where tokenizer.json and tokenizer_config.json are; default the checkpoint directory. */
  tokenizerDir?: string;
  /** Default: the checkpoint directory's name. */
  modelName?: string;
  device?: DeviceChoice;
  threads?: number;
  /** How the inference graphs take the weights (src/gpu/model-inputs.ts; default float32). */
  weights?: WeightsDtype;
}

export interface ServedCheckpoint extends AsyncDisposable {
  server: OpenAIServer;
  close(): Promise<void>;
}

export async function serveCheckpoint(o: ServeCheckpointOptions): Promise<ServedCheckpoint> {
  const codec = await loadTextCodec(o.tokenizerDir ?? o.checkpoint);
  const { context: contextLength } = await checkpointLimits(o.checkpoint);
  const host = await PolicyHost.start({
    checkpoint: o.checkpoint,
    device: o.device ?? 'cpu',
    intraOpThreads: o.threads,
    vocabPieces: codec.pieces(),
    weights: o.weights,
  });
  for (const line of host.startLog) o.log?.(line);
  let server: OpenAIServer;
  try {
    server = await OpenAIServer.start({
      ...o,
      modelName: o.modelName ?? basename(resolve(o.checkpoint)),
      contextLength,
      codec,
      engine: host,
    });
  } catch (err) {
    await host.close();
    throw err;
  }
  const close = async () => {
    await server.close();
    await host.close();
  };
  return { server, close, [Symbol.asyncDispose]: close };
}
