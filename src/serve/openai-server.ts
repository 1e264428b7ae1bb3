/**
 * An OpenAI-compatible HTTP server for one policy (`akbe policy serve --http PORT`):
 *
 *   POST /v1/completions           text or token-id prompts, logprobs, token ids (completions-request.ts)
 *   GET  /v1/models                the served model, with vLLM's `max_model_len`
 *   GET  /health                   200 once the policy is loaded
 *   POST /update_weights_from_disk {"model_path": DIR}: load a published checkpoint (SGLang's
 *                                  endpoint name; only when started with allowWeightUpdates)
 *
 * It binds 127.0.0.1 unless told otherwise, passes every request through the shared guard
 * (src/util/http-guard.ts: Host, Origin, limits), and with an API key requires
 * `Authorization: Bearer` (compared in constant time).
 * Every request is validated; a bad one gets a 4xx with OpenAI's error body naming the field, a
 * failure inside the policy a 500; neither stops the server. Generation runs in the policy's worker
 * thread (its batcher decodes concurrent requests together), so this event loop only parses JSON.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GenerateRequest, GenerateResult } from '../gpu/decoder.js';
import type { TextCodec } from '../text/codec.js';
import { PayloadTooLargeError, readBody } from '../util/http-body.js';
import { createGuardedServer, type HttpLimits, secretEquals } from '../util/http-guard.js';
import {
  type CompletionRequest,
  CompletionRequestError,
  parseCompletionRequest,
} from './completions-request.js';

/** What the server needs from a policy: the decode loop (PolicyHost has it) and, optionally, reloading. */
export interface CompletionEngine {
  generate(req: GenerateRequest): Promise<GenerateResult>;
  /** Loads a checkpoint directory in place (weight sync); absent = the endpoint answers 501. */
  loadCheckpoint?(dir: string): Promise<void>;
}

export interface OpenAIServerOptions {
  /** The model id clients name (`model`); a request naming another gets 404. */
  modelName: string;
  /** Prompt + generated tokens must fit (the model's positions). */
  contextLength: number;
  codec: TextCodec;
  engine: CompletionEngine;
  port: number;
  /** Default 127.0.0.1: the server is reachable from this machine only. */
  host?: string;
  /** When set, every request needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Enables POST /update_weights_from_disk (it makes the server read a path the client names). */
  allowWeightUpdates?: boolean;
  /** Most choices (prompts × n) in one request; default 64. */
  maxChoices?: number;
  /** Largest request body; default 8 MiB. */
  maxBodyBytes?: number;
  /** Host header values accepted besides localhost, IP literals and the bound host (--allow-host). */
  allowHosts?: string[];
  limits?: Partial<HttpLimits>;
  log?: (line: string) => void;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'invalid_request_error',
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    // A body cut short (413) leaves unread bytes on the socket: it cannot carry another request.
    ...(status === 413 ? { connection: 'close' } : {}),
  });
  res.end(text);
}

/** The request body as JSON; 413 past `limit` bytes, 400 when it does not parse. */
async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  let text: string;
  try {
    text = await readBody(req, limit);
  } catch (err) {
    if (err instanceof PayloadTooLargeError) throw new HttpError(413, err.message);
    throw err;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, `the request body is not valid JSON (${(err as Error).message})`);
  }
}

export class OpenAIServer implements AsyncDisposable {
  readonly stats = { requests: 0, errors: 0, completionTokens: 0 };
  private readonly server: Server;
  private weightsLoading: Promise<void> = Promise.resolve();

  private constructor(private readonly o: OpenAIServerOptions) {
    // The shared guard (src/util/http-guard.ts) first: Host/Origin (no DNS rebinding, no
    // cross-site `text/plain` POST to the weight endpoint), timeouts, header limit, no crash.
    const rules = { host: o.host ?? '127.0.0.1', allowHosts: o.allowHosts };
    this.server = createGuardedServer(
      rules,
      (req, res) =>
        this.handle(req, res).catch((err) => {
          this.stats.errors++;
          const e =
            err instanceof HttpError
              ? err
              : err instanceof CompletionRequestError
                ? new HttpError(err.status, err.message, 'invalid_request_error', err.param)
                : new HttpError(500, `the policy failed: ${(err as Error).message}`, 'server_error');
          if (e.status >= 500) o.log?.(`openai server: ${req.method} ${req.url}: ${e.message}`);
          if (!res.headersSent)
            send(res, e.status, {
              error: { message: e.message, type: e.type, param: e.param, code: e.status },
            });
          else res.end();
        }),
      o.limits,
    );
  }

  static async start(o: OpenAIServerOptions): Promise<OpenAIServer> {
    const s = new OpenAIServer(o);
    await new Promise<void>((resolve, reject) => {
      s.server.once('error', reject);
      s.server.listen(o.port, o.host ?? '127.0.0.1', () => {
        s.server.off('error', reject);
        resolve();
      });
    });
    return s;
  }

  /** The bound address, e.g. `http://127.0.0.1:8000` (the port is the real one when 0 was asked). */
  get url(): string {
    const a = this.server.address() as AddressInfo;
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host}:${a.port}`;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.stats.requests++;
    const given = req.headers.authorization ?? '';
    if (this.o.apiKey !== undefined && !secretEquals(given, `Bearer ${this.o.apiKey}`))
      throw new HttpError(
        401,
        'missing or wrong API key (Authorization: Bearer <key>)',
        'authentication_error',
      );
    const path = (req.url ?? '/').split('?')[0];
    const route = `${req.method} ${path}`;
    switch (route) {
      case 'GET /health':
        return send(res, 200, { status: 'ok' });
      case 'GET /v1/models':
        return send(res, 200, {
          object: 'list',
          data: [
            {
              id: this.o.modelName,
              object: 'model',
              created: 0,
              owned_by: 'akbe',
              max_model_len: this.o.contextLength,
            },
          ],
        });
      case 'POST /v1/completions': {
        const body = await readJsonBody(req, this.o.maxBodyBytes ?? 8 << 20);
        return send(res, 200, await this.complete(body));
      }
      case 'POST /update_weights_from_disk': {
        const body = (await readJsonBody(req, 1 << 16)) as { model_path?: unknown } | null;
        return send(res, 200, await this.updateWeights(body?.model_path));
      }
    }
    const known = ['/health', '/v1/models', '/v1/completions', '/update_weights_from_disk'];
    if (known.includes(path)) throw new HttpError(405, `${req.method} is not allowed on ${path}`);
    throw new HttpError(404, `no route ${path} (this server has ${known.join(', ')})`);
  }

  private async updateWeights(modelPath: unknown) {
    if (!this.o.allowWeightUpdates || !this.o.engine.loadCheckpoint)
      throw new HttpError(
        this.o.allowWeightUpdates ? 501 : 403,
        'weight updates are off (start the server with --allow-weight-updates)',
      );
    if (typeof modelPath !== 'string' || modelPath === '')
      throw new HttpError(
        400,
        'model_path: must be a checkpoint directory',
        'invalid_request_error',
        'model_path',
      );
    const load = this.o.engine.loadCheckpoint.bind(this.o.engine);
    // One load at a time; requests already decoding finish on the weights they started with.
    const next = this.weightsLoading.then(() => load(modelPath));
    this.weightsLoading = next.catch(() => undefined);
    try {
      await next;
    } catch (err) {
      throw new HttpError(
        400,
        `model_path ${modelPath}: ${(err as Error).message}`,
        'invalid_request_error',
        'model_path',
      );
    }
    this.o.log?.(`openai server: loaded weights from ${modelPath}`);
    return { success: true, message: `loaded ${modelPath}` };
  }

  private async complete(body: unknown) {
    const o = this.o;
    const r = parseCompletionRequest(body, { vocabSize: o.codec.vocabSize, maxChoices: o.maxChoices ?? 64 });
    if (r.model !== null && r.model !== o.modelName)
      throw new HttpError(
        404,
        `model ${r.model} does not exist; this server has ${o.modelName}`,
        'invalid_request_error',
        'model',
      );
    const prompts = r.prompts.map((p, i) => {
      const ids = typeof p === 'string' ? o.codec.encode(p) : p;
      if (ids.length === 0)
        throw new HttpError(400, `prompt[${i}]: encodes to no tokens`, 'invalid_request_error', 'prompt');
      if (ids.length + r.maxTokens > o.contextLength)
        throw new HttpError(
          400,
          `prompt[${i}] has ${ids.length} tokens and max_tokens is ${r.maxTokens}: more than the model's context of ${o.contextLength}`,
          'invalid_request_error',
          'max_tokens',
        );
      return ids;
    });
    const seed = r.seed ?? randomInt(0, 2 ** 32 - 1);
    const eos = new Set(o.codec.stopIds);
    const stopTokens = [...new Set([...(r.ignoreEos ? [] : o.codec.stopIds), ...r.stopTokenIds])];
    const jobs = prompts.flatMap((prompt) =>
      Array.from({ length: r.n }, () => prompt).map((p, i) =>
        o.engine.generate({
          prompt: p,
          maxNewTokens: r.maxTokens,
          seed: (seed + i) >>> 0,
          temperature: r.temperature,
          topP: r.topP,
          stopTokens,
          stopStrings: r.stop,
        }),
      ),
    );
    const results = await Promise.all(jobs);
    const choices = results.map((g, index) =>
      this.choice(r, g, index, prompts[Math.floor(index / r.n)], eos),
    );
    const completionTokens = results.reduce((s, g) => s + g.tokens.length, 0);
    const promptTokens = prompts.reduce((s, p) => s + p.length, 0);
    this.stats.completionTokens += completionTokens;
    return {
      id: `cmpl-${randomBytes(12).toString('hex')}`,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: o.modelName,
      choices,
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
      },
    };
  }

  private choice(r: CompletionRequest, g: GenerateResult, index: number, prompt: number[], eos: Set<number>) {
    const codec = this.o.codec;
    let text = codec.decode(g.tokens, { skipSpecialTokens: r.skipSpecialTokens });
    if (g.finishReason === 'stop_string' && g.stopString && !r.includeStopStrInOutput) {
      const at = text.indexOf(g.stopString);
      if (at >= 0) text = text.slice(0, at);
    }
    const last = g.tokens[g.tokens.length - 1];
    const stopReason =
      g.finishReason === 'stop_string'
        ? (g.stopString ?? null)
        : g.finishReason === 'stop_token' && !eos.has(last)
          ? last
          : null;
    let logprobs = null;
    if (r.logprobs !== null) {
      const pieces = codec.pieces();
      const tokens = g.tokens.map((id) => (r.returnTokensAsTokenIds ? `token_id:${id}` : (pieces[id] ?? '')));
      const offsets: number[] = [];
      let at = 0;
      for (const id of g.tokens) {
        offsets.push(at);
        at += (pieces[id] ?? '').length;
      }
      logprobs = {
        tokens,
        token_logprobs: g.policyLogprobs,
        top_logprobs: tokens.map((t, i) => ({ [t]: g.policyLogprobs[i] })),
        text_offset: offsets,
      };
    }
    return {
      index,
      text,
      logprobs,
      finish_reason: g.finishReason === 'length' ? 'length' : 'stop',
      stop_reason: stopReason,
      ...(r.returnTokenIds ? { token_ids: g.tokens, prompt_token_ids: prompt } : {}),
    };
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections(); // keep-alive sockets would hold close() open
    await closed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
