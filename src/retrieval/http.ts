/**
 * An HTTP endpoint that Search-R1's own training client can use unchanged: the shape of its
 * retrieval server (search_r1/search/retrieval_server.py, FastAPI + pydantic) and the batches its
 * GRPO/PPO scripts send (train batch 512 x 5 rollouts = 2,560 queries in one request).
 *
 *   POST /retrieve  {"queries": ["..."], "topk": 3, "return_scores": true}
 *   200 {"result": [[{"document": {"id", "contents"}, "score": 0.83}, ...], ...]}
 *
 * - `/retrieve/` is served too (FastAPI answers it with a 307 to `/retrieve`, which the client
 *   follows; here it is answered directly).
 * - Body fields are read as pydantic reads them (retrieve-request.ts): `"topk": "3"`,
 *   `"return_scores": 1` are fine; a missing, null or 0 topk means the default (3).
 * - Errors in FastAPI's shapes: 422 `{"detail": [{type, loc, msg, input}]}` for a bad body,
 *   404 / 405 `{"detail": "Not Found" | "Method Not Allowed"}`, 413 for a body over the limit.
 * - Every request passes the shared guard first (src/util/http-guard.ts): a Host that does not
 *   name this server (DNS rebinding) or another site's Origin gets 403.
 * - With `return_scores` false each query's entry is its plain list of documents.
 * - Big batches are searched in chunks of `chunkQueries` and the reply is written chunk by chunk,
 *   so memory holds one chunk's results, not the whole reply.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PayloadTooLargeError, readBody } from '../util/http-body.js';
import { createGuardedServer, type HttpLimits } from '../util/http-guard.js';
import {
  DEFAULT_RETRIEVE_LIMITS,
  type FastApiError,
  parseRetrieveBody,
  type RetrieveLimits,
} from './retrieve-request.js';
import { DEFAULT_TOPK } from './search-request.js';
import type { SearchBackend, SearchHit } from './searcher.js';

export interface RetrievalHttpOptions {
  port?: number;
  host?: string;
  defaultTopk?: number;
  limits?: RetrieveLimits;
  /** Largest accepted request body in bytes (default 64 MiB: 8,192 queries of 8 KiB). */
  maxBodyBytes?: number;
  /** Queries per backend search; the reply is streamed one chunk at a time (default 512). */
  chunkQueries?: number;
  /** Host header values accepted besides localhost, IP literals and the bound host (--allow-host). */
  allowHosts?: string[];
  httpLimits?: Partial<HttpLimits>;
}

export const DEFAULT_MAX_BODY_BYTES = 64 << 20;
export const DEFAULT_CHUNK_QUERIES = 512;

export interface RetrievalHttpServer extends AsyncDisposable {
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  close(): Promise<void>;
}

export async function startRetrievalHttpServer(
  backend: SearchBackend,
  opts: RetrievalHttpOptions = {},
): Promise<RetrievalHttpServer> {
  const maxBody = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const chunk = opts.chunkQueries ?? DEFAULT_CHUNK_QUERIES;
  // The shared guard (src/util/http-guard.ts): Host/Origin, timeouts, header limit, no crash.
  const server = createGuardedServer(
    { host: opts.host ?? '127.0.0.1', allowHosts: opts.allowHosts },
    (req, res) =>
      handle(req, res).catch((e) => {
        if (res.headersSent)
          res.destroy(e as Error); // a cut reply, never a silently short one
        else send(res, 500, { detail: `internal error: ${(e as Error).message}` });
      }),
    opts.httpLimits,
  );

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/retrieve' && path !== '/retrieve/') return send(res, 404, { detail: 'Not Found' });
    if (req.method !== 'POST') return send(res, 405, { detail: 'Method Not Allowed' });
    let text: string;
    try {
      text = await readBody(req, maxBody);
    } catch (e) {
      if (e instanceof PayloadTooLargeError)
        return send(res, 413, {
          detail: `${e.message} (raise it with akbe index serve --max-body-bytes)`,
        });
      throw e;
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (e) {
      return send(res, 422, { detail: [jsonError(text, e as Error)] });
    }
    const parsed = parseRetrieveBody(body, opts.limits ?? DEFAULT_RETRIEVE_LIMITS);
    if (!parsed.ok) return send(res, 422, { detail: parsed.errors });
    const { queries, returnScores } = parsed.request;
    const topk = parsed.request.topk ?? opts.defaultTopk ?? DEFAULT_TOPK;
    const entry = (hits: SearchHit[]) =>
      JSON.stringify(
        hits.map((h) => {
          const document = { id: h.id, contents: h.contents };
          return returnScores ? { document, score: h.score } : document;
        }),
      );
    // The first chunk is searched before the status is sent, so a failing index is a 500.
    const first = await backend.search(queries.slice(0, chunk), topk);
    res.writeHead(200, { 'content-type': 'application/json' });
    await write(res, `{"result":[${first.map(entry).join(',')}`);
    for (let at = chunk; at < queries.length; at += chunk) {
      const hits = await backend.search(queries.slice(at, at + chunk), topk);
      await write(res, `,${hits.map(entry).join(',')}`);
    }
    res.end(']}');
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port, address } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return { url: `http://${host}:${port}`, port, server, close, [Symbol.asyncDispose]: close };
}

/** FastAPI's error for a body that is not JSON (`loc` holds the character position). */
function jsonError(text: string, e: Error): FastApiError {
  if (text.trim() === '') return { type: 'missing', loc: ['body'], msg: 'Field required', input: null };
  const at = /position (\d+)/.exec(e.message);
  return {
    type: 'json_invalid',
    loc: ['body', at ? Number(at[1]) : 0],
    msg: 'JSON decode error',
    input: {},
    ctx: { error: e.message },
  };
}

/** Writes and waits for the socket to take it (backpressure keeps the reply's memory bounded). */
function write(res: ServerResponse, text: string): Promise<void> {
  if (res.write(text)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      res.off('drain', onDrain).off('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => done();
    const onClose = () => done(new Error('client closed the connection'));
    res.on('drain', onDrain).on('close', onClose);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
