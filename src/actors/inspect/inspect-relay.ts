/**
 * The inspector relay: a local HTTP + WebSocket server between akbe's machines and the Stately
 * inspector web page. Same wire protocol as `@statelyai/inspect/server` (each text message a
 * client sends is one JSON inspection event, relayed to every other client; a new client first
 * receives what was kept), and the page at `/` is a bridge: it embeds the Stately inspector
 * (https://stately.ai/inspect) in an iframe and posts each relayed event into it once the
 * inspector says `@statelyai.connected`.
 *
 * Why not `createInspectorServer` itself: it has no listening signal, crashes the process on a
 * busy port (an unhandled 'error'), cannot take port 0, keeps only the last 200 messages, and its
 * `stop()` leaves connected browser tabs open, so `akbe train --inspect` would not exit while a
 * tab is open. Here `close()` ends every connection, a busy port is an InspectorPortInUseError,
 * and actor registrations are kept (plus the last `keepMessages` other messages), so a browser
 * opened late still sees the whole actor tree.
 *
 * Security (docs/security.md): inspection events hold prompts and gold answers, and any web page
 * open in the user's browser can open a WebSocket to localhost. So:
 * - the page and every WebSocket upgrade pass the shared guard (src/util/http-guard.ts): Host must
 *   name this relay (localhost, an IP literal, the bound host, or `allowHosts`), so a
 *   DNS-rebinding page is refused (403); a browser's Origin must be this relay's own page (or
 *   `allowOrigins`), clients that send no Origin (Node, curl) are not web pages and pass; GET
 *   only, no body, slow clients cut, no request crashes the process;
 * - viewers are read-only: only a connection carrying the producer token (`producerUrl`, a fresh
 *   random token per relay) may send, and a viewer that sends is disconnected (1008);
 * - a producer message must be one JSON inspection event (`@xstate.*` type, a sessionId) of at
 *   most `maxMessageBytes` (default 1 MiB); others are dropped and counted;
 * - what is kept for late viewers is capped at `keepBytes` (default 64 MiB): the oldest ordinary
 *   messages go first, then the oldest registrations.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import {
  checkRequest,
  createGuardedServer,
  type GuardRules,
  type HttpLimits,
  secretEquals,
} from '../../util/http-guard.js';

export class InspectorPortInUseError extends Error {
  constructor(
    readonly port: number,
    opts?: ErrorOptions,
  ) {
    super(`inspector port ${port} is in use: pick another with --inspect-port P (0 = any free port)`, opts);
    this.name = 'InspectorPortInUseError';
  }
}

export interface InspectorRelayOptions {
  /** 0 picks a free port. Default 8080 (the Stately tools' default). */
  port?: number;
  /** Interface to bind; default 127.0.0.1 (inspection data stays on this machine). */
  host?: string;
  /** The Stately inspector page the bridge embeds. */
  inspectorUrl?: string;
  /** Non-registration messages kept for late viewers (default 2000). */
  keepMessages?: number;
  /** Bytes of messages kept for late viewers, registrations included (default 64 MiB). */
  keepBytes?: number;
  /** Largest producer message relayed (default 1 MiB); larger ones are dropped. */
  maxMessageBytes?: number;
  /** Origins allowed besides the relay's own page (e.g. `https://my-dashboard.example`). */
  allowOrigins?: string[];
  /** Host header values allowed besides localhost, IP literals and the bound host (`name` or `name:port`). */
  allowHosts?: string[];
  limits?: Partial<HttpLimits>;
}

export interface InspectorRelay extends AsyncDisposable {
  readonly port: number;
  /** The bridge page to open in a browser. */
  readonly url: string;
  /** Where viewers connect (read-only). */
  readonly wsUrl: string;
  /** Where producers (inspector clients of akbe's machines) connect: carries the secret token. */
  readonly producerUrl: string;
  /** Messages relayed so far. */
  readonly relayed: number;
  /** Messages refused so far: from viewers, without a valid shape, or over the size cap. */
  readonly dropped: number;
  /** Bytes kept for late viewers now. */
  readonly keptBytes: number;
  close(): Promise<void>;
}

export const STATELY_INSPECTOR_URL = 'https://stately.ai/inspect';

function bridgePage(inspectorUrl: string): string {
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>akbe · Stately inspector</title>
<style>html,body{height:100%;margin:0;font:13px system-ui,sans-serif}
#bar{height:22px;line-height:22px;padding:0 8px;background:#222;color:#ddd}
iframe{width:100%;height:calc(100% - 22px);border:0}</style></head>
<body><div id="bar">akbe inspector relay: <span id="status">connecting…</span></div>
<iframe id="inspector" src="${inspectorUrl}"></iframe>
<script>
// Relay -> inspector iframe. Events wait until the inspector announces itself.
const frame = document.getElementById('inspector');
const status = document.getElementById('status');
const pending = [];
let ready = false, received = 0;
window.addEventListener('message', (e) => {
  if (e.data && e.data.type === '@statelyai.connected') {
    ready = true;
    for (const ev of pending.splice(0)) frame.contentWindow.postMessage(ev, '*');
  }
});
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host);
ws.onopen = () => { status.textContent = 'connected'; };
ws.onclose = () => { status.textContent = 'relay closed (' + received + ' events received)'; };
ws.onmessage = (m) => {
  const ev = JSON.parse(m.data);
  received++;
  status.textContent = 'connected, ' + received + ' events' + (ready ? '' : ' (waiting for the inspector page to load)');
  if (ready) frame.contentWindow.postMessage(ev, '*'); else pending.push(ev);
};
</script></body></html>
`;
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      reject(err.code === 'EADDRINUSE' ? new InspectorPortInUseError(port, { cause: err }) : err);
    };
    const onListening = () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

export const RELAY_DEFAULTS = {
  keepMessages: 2000,
  keepBytes: 64 * 1024 * 1024,
  maxMessageBytes: 1024 * 1024,
};

/** A producer message worth relaying: one JSON inspection event. */
function isInspectionMessage(msg: string): boolean {
  try {
    const v = JSON.parse(msg) as { type?: unknown; sessionId?: unknown };
    return (
      typeof v === 'object' &&
      v !== null &&
      typeof v.type === 'string' &&
      v.type.startsWith('@xstate.') &&
      typeof v.sessionId === 'string'
    );
  } catch {
    return false;
  }
}

/**
 * What a late viewer is sent, in arrival order: every actor registration and the last `keep`
 * other messages, all within `keepBytes` (oldest others dropped first, then oldest registrations).
 */
class KeptMessages {
  private readonly registrations: Array<[number, string]> = [];
  private readonly recent: Array<[number, string]> = [];
  bytes = 0;
  private n = 0;

  constructor(
    private readonly keep: number,
    private readonly keepBytes: number,
  ) {}

  add(msg: string): void {
    const n = this.n++;
    if (msg.includes('"type":"@xstate.actor"')) this.registrations.push([n, msg]);
    else this.recent.push([n, msg]);
    this.bytes += msg.length;
    while (this.recent.length > this.keep) this.bytes -= this.recent.shift()![1].length;
    while (this.bytes > this.keepBytes && (this.recent.length || this.registrations.length))
      this.bytes -= (this.recent.length ? this.recent : this.registrations).shift()![1].length;
  }

  all(): string[] {
    return [...this.registrations, ...this.recent].sort((a, b) => a[0] - b[0]).map(([, msg]) => msg);
  }
}

/** A graceful close first, so viewers get what was just relayed; then no waiting on them. */
async function closeRelay(wss: WebSocketServer, http: Server): Promise<void> {
  const viewers = [...wss.clients];
  await Promise.race([
    Promise.all(
      viewers.map(
        (c) =>
          new Promise((r) => {
            c.once('close', r);
            c.close(1001, 'akbe done');
          }),
      ),
    ),
    new Promise((r) => setTimeout(r, 500).unref()),
  ]);
  for (const client of wss.clients) client.terminate();
  await new Promise<void>((r) => wss.close(() => r()));
  await new Promise<void>((r) => http.close(() => r()));
}

/** Whether a connection presents the producer token (anything else is a read-only viewer). */
function presentsToken(req: IncomingMessage, token: string): boolean {
  let given = '';
  try {
    given = new URL(req.url ?? '/', 'http://relay').searchParams.get('token') ?? '';
  } catch {
    return false; // an unparsable URL (`http://[`) is a viewer, not a crash
  }
  return secretEquals(given, token);
}

/** The relay's WebSocket server on `http`: upgrades pass the page's guard, frames are bounded. */
function relaySocketServer(http: Server, rules: GuardRules, maxMessageBytes: number): WebSocketServer {
  return new WebSocketServer({
    server: http,
    // A hard bound on one frame (ws closes with 1009 above it); smaller over-cap messages are dropped.
    maxPayload: Math.max(maxMessageBytes * 4, 64 * 1024),
    verifyClient: (
      info: { req: IncomingMessage },
      done: (ok: boolean, code?: number, msg?: string) => void,
    ) => {
      // The upgrade request passes the same guard as the page (src/util/http-guard.ts).
      const verdict = checkRequest(info.req, info.req.socket.localPort ?? 0, rules);
      if (verdict.ok) done(true);
      else done(false, verdict.status, verdict.reason);
    },
  });
}

/**
 * One connection: a viewer gets what was kept, then every relayed message, and is closed if it
 * sends; the producer (it presented the token) sends inspection messages, each checked and relayed.
 */
function relayConnection(
  wss: WebSocketServer,
  ws: WebSocket,
  producer: boolean,
  kept: KeptMessages,
  counts: { relayed: number; dropped: number },
  maxMessageBytes: number,
): void {
  if (!producer) for (const msg of kept.all()) ws.send(msg);
  ws.on('message', (data, isBinary) => {
    if (!producer) {
      counts.dropped++;
      ws.close(1008, 'viewers are read-only');
      return;
    }
    const msg = isBinary ? '' : data.toString();
    if (msg.length === 0 || msg.length > maxMessageBytes || !isInspectionMessage(msg)) {
      counts.dropped++;
      return;
    }
    counts.relayed++;
    kept.add(msg);
    for (const client of wss.clients)
      if (client !== ws && client.readyState === WebSocket.OPEN) client.send(msg);
  });
  ws.on('error', () => undefined); // a viewer that vanishes is not the relay's failure
}

export async function startInspectorRelay(opts: InspectorRelayOptions = {}): Promise<InspectorRelay> {
  const host = opts.host ?? '127.0.0.1';
  const maxMessageBytes = opts.maxMessageBytes ?? RELAY_DEFAULTS.maxMessageBytes;
  const page = bridgePage(opts.inspectorUrl ?? STATELY_INSPECTOR_URL);
  const token = randomBytes(24).toString('hex');
  const rules: GuardRules = {
    host,
    allowHosts: opts.allowHosts,
    allowOrigins: opts.allowOrigins,
    methods: ['GET', 'HEAD'],
    maxBodyBytes: 0,
  };
  const http = createGuardedServer(
    rules,
    (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(page);
    },
    opts.limits,
  );
  const wss = relaySocketServer(http, rules, maxMessageBytes);
  const kept = new KeptMessages(
    opts.keepMessages ?? RELAY_DEFAULTS.keepMessages,
    opts.keepBytes ?? RELAY_DEFAULTS.keepBytes,
  );
  const counts = { relayed: 0, dropped: 0 };
  wss.on('connection', (ws, req) =>
    relayConnection(wss, ws, presentsToken(req, token), kept, counts, maxMessageBytes),
  );
  // The WebSocket server re-emits the HTTP server's errors; listen() reports them.
  wss.on('error', () => undefined);
  const port = await listen(http, opts.port ?? 8080, host);
  const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
  let closed: Promise<void> | null = null;
  const relay: InspectorRelay = {
    port,
    url: `http://${shown}:${port}`,
    wsUrl: `ws://${shown}:${port}`,
    producerUrl: `ws://${shown}:${port}/produce?token=${token}`,
    get relayed() {
      return counts.relayed;
    },
    get dropped() {
      return counts.dropped;
    },
    get keptBytes() {
      return kept.bytes;
    },
    close() {
      closed ??= closeRelay(wss, http);
      return closed;
    },
    [Symbol.asyncDispose]() {
      return relay.close();
    },
  };
  return relay;
}
