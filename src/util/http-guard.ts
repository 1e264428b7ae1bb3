/**
 * The one guard every HTTP server akbe runs shares (the dashboard, the inspector relay,
 * `/retrieve` of `akbe index serve`, the OpenAI-compatible server of `akbe policy serve`).
 * Each binds 127.0.0.1 by default, and any web page open in the user's browser can still reach
 * 127.0.0.1, so:
 *
 * - Host must name this server: `localhost`, an IP literal, the bound host name, or an
 *   `allowHosts` value, with the port the request came in on. A DNS-rebinding page reaches the
 *   port under its own domain name and sends that name as Host: refused (403). IP literals pass
 *   because no page can rebind one.
 * - Origin, when a browser sends one, must be this server's own (`http://<Host>`) or an
 *   `allowOrigins` value: another site's page can neither read the answers nor send a "simple"
 *   cross-site request (a `text/plain` POST needs no preflight, so only this check stops it). A
 *   `Sec-Fetch-Site: cross-site` request is refused too, except a plain link click (a GET
 *   navigation), which reads nothing into the other site.
 * - Methods outside `methods` get 405; a declared body over `maxBodyBytes` gets 413 before the
 *   handler runs (each server still counts the bytes it reads, util/http-body.ts); headers over
 *   `maxHeaderBytes` get 431 from Node itself.
 * - Slow clients are cut: the headers must arrive within `headersTimeoutMs`, the whole request
 *   within `requestTimeoutMs` (Node answers 408).
 * - No request can crash the process: a handler's throw or rejection (a bad percent-encoding is a
 *   URIError) is answered 400 / 413 / 500, or the socket is cut if the reply had begun.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { PayloadTooLargeError } from './http-body.js';

export interface HttpLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  maxHeaderBytes: number;
  /** How often Node checks the two timeouts (they fire up to this late). */
  checkIntervalMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 120_000,
  maxHeaderBytes: 16 * 1024,
  checkIntervalMs: 1_000,
};

export interface GuardRules {
  /** The bound interface (`127.0.0.1`, `::1`, `0.0.0.0`, a host name). */
  host: string;
  /** More Host values: `name` (on this server's port) or `name:port` (exactly). */
  allowHosts?: readonly string[];
  /** More Origins, e.g. `https://my-dashboard.example`. */
  allowOrigins?: readonly string[];
  /** Allowed methods (default: any). */
  methods?: readonly string[];
  /** A larger declared Content-Length is refused with 413 (default: no check here). */
  maxBodyBytes?: number;
}

export type GuardVerdict = { ok: true } | { ok: false; status: 403 | 405 | 413; reason: string };

interface RequestHead {
  method?: string;
  headers: Record<string, string | string[] | undefined>;
}

/** An error a handler throws to answer with `status` (a bad request, not a server failure). */
export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HttpStatusError';
  }
}

/** `host[:port]` → [hostname without brackets, port or null]; '' when it does not parse. */
export function splitHost(value: string): [string, number | null] {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]/@\s]+)(?::(\d{1,5}))?$/.exec(value.trim());
  if (!m) return ['', null];
  const name = m[1].startsWith('[') ? m[1].slice(1, -1) : m[1];
  return [name.toLowerCase().replace(/\.$/, ''), m[2] === undefined ? null : Number(m[2])];
}

function header(req: RequestHead, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Whether a Host header value names this server (see the header comment). */
export function hostAllowed(value: string, port: number, rules: GuardRules): boolean {
  const [name, given] = splitHost(value);
  if (name === '') return false;
  const p = given ?? 80;
  for (const extra of rules.allowHosts ?? []) {
    const [n, ep] = splitHost(extra);
    if (n === name && (ep === null ? p === port : ep === p)) return true;
  }
  if (p !== port) return false;
  const bound = rules.host.toLowerCase().replace(/^\[|\]$/g, '');
  return name === 'localhost' || isIP(name) !== 0 || name === bound;
}

/** The verdict on one request's head; pure (the port is the one it came in on). */
export function checkRequest(req: RequestHead, port: number, rules: GuardRules): GuardVerdict {
  const method = req.method ?? '';
  if (rules.methods && !rules.methods.includes(method))
    return { ok: false, status: 405, reason: `method ${method} is not allowed here` };
  const host = header(req, 'host');
  if (!host) return { ok: false, status: 403, reason: 'missing Host header' };
  if (!hostAllowed(host, port, rules))
    return { ok: false, status: 403, reason: `Host ${host} does not name this server` };
  const origin = header(req, 'origin');
  if (origin !== undefined) {
    const o = origin.toLowerCase().replace(/\/$/, '');
    const allowed = (rules.allowOrigins ?? []).map((x) => x.toLowerCase().replace(/\/$/, ''));
    if (o !== `http://${host.toLowerCase()}` && !allowed.includes(o))
      return { ok: false, status: 403, reason: `Origin ${origin} is another site` };
  } else if (header(req, 'sec-fetch-site') === 'cross-site') {
    const navigation = method === 'GET' && header(req, 'sec-fetch-mode') === 'navigate';
    if (!navigation) return { ok: false, status: 403, reason: 'a cross-site request' };
  }
  const length = Number(header(req, 'content-length') ?? 0);
  if (rules.maxBodyBytes !== undefined && length > rules.maxBodyBytes)
    return { ok: false, status: 413, reason: `request body is larger than ${rules.maxBodyBytes} bytes` };
  return { ok: true };
}

/** Constant time in the secrets' content: both sides hashed first, so lengths leak nothing either. */
export function secretEquals(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** What a thrown error becomes (status, one-line text). */
export function errorStatus(err: unknown): [number, string] {
  const e = err as { status?: unknown; message?: unknown };
  if (err instanceof URIError) return [400, `bad percent-encoding in the URL (${e.message})`];
  if (err instanceof PayloadTooLargeError) return [413, err.message];
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 600)
    return [e.status, String(e.message)];
  return [500, `internal error: ${e?.message ?? String(err)}`];
}

/** Answers `status` with a text body (connection closed when the request body may be unread). */
export function sendText(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
    ...(status === 413 || status >= 500 ? { connection: 'close' } : {}),
  });
  res.end(`${text}\n`);
}

export type GuardedHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/**
 * An http.Server with the limits set and every request checked, then handed to `handler`; what
 * `handler` throws or rejects with is answered (errorStatus) and never reaches the process.
 */
export function createGuardedServer(
  rules: GuardRules,
  handler: GuardedHandler,
  limits: Partial<HttpLimits> = {},
): Server {
  const l = { ...DEFAULT_HTTP_LIMITS, ...limits };
  const server = createServer(
    {
      maxHeaderSize: l.maxHeaderBytes,
      headersTimeout: l.headersTimeoutMs,
      requestTimeout: l.requestTimeoutMs,
      connectionsCheckingInterval: l.checkIntervalMs,
    },
    (req, res) => {
      const verdict = checkRequest(req, req.socket.localPort ?? 0, rules);
      if (!verdict.ok) return sendText(res, verdict.status, verdict.reason);
      let done: void | Promise<void>;
      try {
        done = handler(req, res);
      } catch (err) {
        return sendText(res, ...errorStatus(err));
      }
      if (done) done.catch((err: unknown) => sendText(res, ...errorStatus(err)));
    },
  );
  // A socket error (a reset mid-reply) is the client's business, not the process's.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return void socket.destroy();
    const status =
      err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const reason =
      status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request';
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });
  return server;
}
