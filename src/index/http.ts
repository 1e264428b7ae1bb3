/**
 * An HTTP endpoint shaped like Search-R1's retrieval server (search_r1/search/retrieval_server.py),
 * so Search-R1 tooling (its `retriever_url`) can point at an akbe index:
 *
 *   POST /retrieve  {"queries": ["..."], "topk": 3, "return_scores": true}
 *   200 {"result": [[{"document": {"id", "contents"}, "score": 0.83}, ...], ...]}
 *
 * With `return_scores` false (the default there), each query's entry is the plain list of
 * documents `[{"id", "contents"}, ...]`, which is what that server's code intends (its own
 * unpacking of the un-scored result is broken upstream; Search-R1's client always asks for
 * scores). A missing, null or 0 `topk` means the server's default (3), as there. Bad bodies
 * get 400 with `{"error": "..."}`; other paths 404.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SearchBackend } from './searcher.js';
import {
  BadSearchRequestError,
  DEFAULT_LIMITS,
  DEFAULT_TOPK,
  type RequestLimits,
  validateSearchRequest,
} from './service.js';

export interface RetrievalHttpOptions {
  port?: number;
  host?: string;
  defaultTopk?: number;
  limits?: RequestLimits;
  /** Largest accepted request body in bytes. */
  maxBodyBytes?: number;
}

export interface RetrievalHttpServer extends AsyncDisposable {
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  close(): Promise<void>;
}

class PayloadTooLargeError extends Error {
  constructor(limit: number) {
    super(`request body is larger than ${limit} bytes`);
    this.name = 'PayloadTooLargeError';
  }
}

export async function startRetrievalHttpServer(
  backend: SearchBackend,
  opts: RetrievalHttpOptions = {},
): Promise<RetrievalHttpServer> {
  const maxBody = opts.maxBodyBytes ?? 1 << 20;
  const server = createServer((req, res) => {
    handle(req, res).catch((e) => send(res, 500, { error: `internal error: ${(e as Error).message}` }));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/retrieve')
      return send(res, 404, { error: `no route ${req.method} ${path}; use POST /retrieve` });
    if (req.method !== 'POST') return send(res, 405, { error: 'use POST /retrieve' });
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req, maxBody));
    } catch (e) {
      if (e instanceof PayloadTooLargeError) return send(res, 413, { error: e.message });
      return send(res, 400, { error: `body is not valid JSON: ${(e as Error).message}` });
    }
    let request: ReturnType<typeof validateSearchRequest>;
    let returnScores = false;
    try {
      const withDefault =
        isObject(body) && (body.topk === undefined || body.topk === null || body.topk === 0)
          ? { ...body, topk: opts.defaultTopk ?? DEFAULT_TOPK }
          : body;
      request = validateSearchRequest(withDefault, opts.limits ?? DEFAULT_LIMITS);
      const rs = isObject(body) ? body.return_scores : undefined;
      if (rs !== undefined && typeof rs !== 'boolean')
        throw new BadSearchRequestError('"return_scores" must be a boolean');
      returnScores = rs === true;
    } catch (e) {
      return send(res, 400, { error: (e as Error).message });
    }
    const hits = await backend.search(request.queries, request.topk);
    const result = hits.map((list) =>
      list.map((h) => {
        const document = { id: h.id, contents: h.contents };
        return returnScores ? { document, score: h.score } : document;
      }),
    );
    send(res, 200, { result });
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

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new PayloadTooLargeError(limit));
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
