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
 * and every actor registration is kept (plus the last `keepMessages` other messages), so a
 * browser opened late still sees the whole actor tree.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';

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
}

export interface InspectorRelay extends AsyncDisposable {
  readonly port: number;
  /** The bridge page to open in a browser. */
  readonly url: string;
  /** Where inspector clients (and any WebSocket viewer) connect. */
  readonly wsUrl: string;
  /** Messages relayed so far. */
  readonly relayed: number;
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

export async function startInspectorRelay(opts: InspectorRelayOptions = {}): Promise<InspectorRelay> {
  const host = opts.host ?? '127.0.0.1';
  const keep = opts.keepMessages ?? 2000;
  const page = bridgePage(opts.inspectorUrl ?? STATELY_INSPECTOR_URL);
  const http = createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(page);
  });
  const wss = new WebSocketServer({ server: http });
  // Kept for late viewers, in arrival order: every actor registration, the last `keep` others.
  const registrations: Array<[number, string]> = [];
  const recent: Array<[number, string]> = [];
  let relayed = 0;
  wss.on('connection', (ws) => {
    const kept = [...registrations, ...recent].sort((a, b) => a[0] - b[0]);
    for (const [, msg] of kept) ws.send(msg);
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const msg = data.toString();
      const n = relayed++;
      if (msg.includes('"type":"@xstate.actor"')) registrations.push([n, msg]);
      else {
        recent.push([n, msg]);
        if (recent.length > keep) recent.shift();
      }
      for (const client of wss.clients)
        if (client !== ws && client.readyState === WebSocket.OPEN) client.send(msg);
    });
    ws.on('error', () => undefined); // a viewer that vanishes is not the relay's failure
  });
  // The WebSocket server re-emits the HTTP server's errors; listen() reports them.
  wss.on('error', () => undefined);
  const port = await listen(http, opts.port ?? 8080, host);
  const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
  let closed: Promise<void> | null = null;
  const relay: InspectorRelay = {
    port,
    url: `http://${shown}:${port}`,
    wsUrl: `ws://${shown}:${port}`,
    get relayed() {
      return relayed;
    },
    close() {
      closed ??= (async () => {
        // A graceful close first, so viewers get what was just relayed; then no waiting on them.
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
      })();
      return closed;
    },
    [Symbol.asyncDispose]() {
      return relay.close();
    },
  };
  return relay;
}
