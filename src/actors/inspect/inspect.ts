/**
 * Live inspection: `startInspector()` starts the relay (inspect-relay.ts) and returns an xstate
 * `inspect` observer wired to it through @statelyai/inspect's `createInspector`, so that
 *
 *   await using insp = await startInspector({ port: 8080, open: !process.env.CI });
 *   const actor = createActor(runMachine, { input, inspect: insp.inspect });
 *
 * sends every actor registration, event and snapshot of the actor's whole system (the run, its
 * questions and rollouts, the learner) to the Stately inspector page at `insp.url`.
 *
 * The client adapter is ours rather than `createWebSocketInspector`'s: that one's reconnect loop
 * (retry every 5 s on error) outlives `stop()` and keeps the process alive. Ours queues events
 * until the socket opens, reconnects with backoff while running, flushes on `close()`, and leaves
 * no timer behind. Payloads are compacted (token arrays, batches and long lists summarised), since
 * the inspector shows them to a person and a training step's contexts hold megabytes of ids.
 */
import { spawn } from 'node:child_process';
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import { WebSocket } from 'ws';
import type { InspectionEvent } from 'xstate';
import { type InspectorRelay, startInspectorRelay } from './inspect-relay.js';

export interface StartInspectorOptions {
  /** Relay port; 0 = any free port. Default 8080. */
  port?: number;
  /** Open the bridge page in the default browser (pass `!process.env.CI`). Default false. */
  open?: boolean;
  host?: string;
  /** The Stately inspector page the bridge embeds (default https://stately.ai/inspect). */
  inspectorUrl?: string;
  /** Extra origins / Host values the relay accepts (default: only its own page on localhost). */
  allowOrigins?: string[];
  allowHosts?: string[];
}

export interface InspectorHandle extends AsyncDisposable {
  /** Pass to `createActor(machine, { inspect })` of every root actor (a plain callback). */
  readonly inspect: (event: InspectionEvent) => void;
  /** The page a person opens: the relay's bridge to the Stately inspector. */
  readonly url: string;
  /** The relay's WebSocket address for viewers (read-only: watch the raw events there). */
  readonly wsUrl: string;
  /** The producer address with the relay's token: hand it to remote workers' `connectInspector`. */
  readonly producerUrl: string;
  readonly port: number;
  /** Inspection events handed to the relay so far. */
  readonly sent: number;
  /** Sends what is queued, disconnects, and stops the relay (closing every viewer). */
  close(): Promise<void>;
}

const MAX_ARRAY = 16;
const MAX_STRING = 400;
const MAX_DEPTH = 8;

/** A JSON-safe, size-bounded copy for display: cycles, actor refs, typed and long arrays summarised. */
export function compactForInspector(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'string' && value.length > MAX_STRING)
      return `${value.slice(0, MAX_STRING)}… (${value.length} chars)`;
    if (typeof value === 'function' || typeof value === 'symbol') return undefined;
    if (typeof value === 'bigint') return value.toString();
    return value;
  }
  if (ArrayBuffer.isView(value)) {
    const n = (value as unknown as ArrayLike<number>).length ?? 0;
    return `${value.constructor.name}(${n})`;
  }
  if (seen.has(value)) return '[circular]';
  if (depth >= MAX_DEPTH) return Array.isArray(value) ? `[${value.length} items]` : '{…}';
  seen.add(value);
  try {
    const v = value as Record<string, unknown>;
    // An actor ref (children in snapshots): its id is what a person needs.
    if (typeof v.send === 'function' && typeof v.sessionId === 'string')
      return { actor: v.id ?? v.sessionId, sessionId: v.sessionId };
    if (Array.isArray(value)) {
      const head = value.slice(0, MAX_ARRAY).map((x) => compactForInspector(x, depth + 1, seen));
      if (value.length > MAX_ARRAY) head.push(`… ${value.length - MAX_ARRAY} more (${value.length} items)`);
      return head;
    }
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const c = compactForInspector(x, depth + 1, seen);
      if (c !== undefined) out[k] = c;
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

/** Keeps the statechart definition whole (the inspector draws it); compacts the data parts. */
function compactEvent(e: StatelyInspectionEvent): Record<string, unknown> {
  const out: Record<string, unknown> = { ...e };
  if ('snapshot' in e) out.snapshot = compactForInspector(e.snapshot);
  if ('event' in e) out.event = compactForInspector(e.event);
  return out;
}

/** The adapter shape `createInspector` takes (the package does not export its type). */
type InspectorAdapter = Parameters<typeof createInspector>[0];

/** An @statelyai/inspect adapter that writes to the relay over one WebSocket. */
export class RelayClientAdapter implements InspectorAdapter {
  private ws: WebSocket | null = null;
  private queue: string[] = [];
  private running = false;
  private retry: NodeJS.Timeout | null = null;
  private backoffMs = 100;
  sent = 0;

  constructor(
    private readonly url: string,
    private readonly maxQueued = 50_000,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.connect();
  }

  private connect(): void {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.on('open', () => {
      this.backoffMs = 100;
      for (const msg of this.queue.splice(0)) ws.send(msg);
    });
    ws.on('error', () => undefined); // followed by 'close', which schedules the retry
    ws.on('close', () => {
      if (this.ws === ws) this.ws = null;
      if (!this.running) return;
      this.retry = setTimeout(() => {
        this.retry = null;
        if (this.running) this.connect();
      }, this.backoffMs);
      this.backoffMs = Math.min(this.backoffMs * 2, 5_000);
    });
  }

  send(event: StatelyInspectionEvent): void {
    if (!this.running) return;
    const msg = JSON.stringify(compactEvent(event));
    this.sent++;
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(msg);
    else {
      this.queue.push(msg);
      if (this.queue.length > this.maxQueued) this.queue.shift();
    }
  }

  /** Waits (at most `timeoutMs`) until every queued and buffered message has left. */
  async flush(timeoutMs = 2_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const ws = this.ws;
      const open = ws?.readyState === WebSocket.OPEN;
      if (open && this.queue.length === 0 && ws.bufferedAmount === 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  stop(): void {
    this.running = false;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    const ws = this.ws;
    this.ws = null;
    if (ws && ws.readyState !== WebSocket.CLOSED) ws.close();
  }

  /** Stops and resolves once the socket is closed. */
  async close(): Promise<void> {
    const ws = this.ws;
    this.stop();
    if (ws && ws.readyState !== WebSocket.CLOSED) await new Promise((r) => ws.once('close', r));
  }
}

function openBrowser(url: string): void {
  const cmd = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  try {
    const child = spawn(cmd, [url], { stdio: 'ignore', detached: true });
    child.on('error', () => undefined); // no browser here: the URL is printed anyway
    child.unref();
  } catch {
    // same: opening a browser is a convenience
  }
}

export interface InspectorClient extends AsyncDisposable {
  /** Pass to `createActor(machine, { inspect })` of every root actor (a plain callback). */
  readonly inspect: (event: InspectionEvent) => void;
  /** Inspection events sent so far. */
  readonly sent: number;
  /** Sends what is queued (at most 2 s) and disconnects. */
  close(): Promise<void>;
}

/**
 * An inspector client of a relay that runs elsewhere, e.g. in a rollout worker process of a
 * cluster pointed at the `akbe train --inspect` relay's producer URL (with its token): its
 * machines then appear in the same inspector as the run's.
 */
export function connectInspector(wsUrl: string): InspectorClient {
  const adapter = new RelayClientAdapter(wsUrl);
  const inspector = createInspector(adapter);
  inspector.start();
  let closing: Promise<void> | null = null;
  const client: InspectorClient = {
    // Snapshots are compacted BEFORE @statelyai/inspect serialises them whole: the run machine's
    // context holds the question pool and each relayed fact makes a run snapshot, so serialising
    // it uncut would cost megabytes per fact.
    inspect: (event) =>
      inspector.inspect.next?.(
        event.type === '@xstate.snapshot'
          ? ({ ...event, snapshot: compactForInspector(event.snapshot) } as InspectionEvent)
          : event,
      ),
    get sent() {
      return adapter.sent;
    },
    close() {
      closing ??= (async () => {
        // The inspect observer converts events on a zero-delay timer: let the last ones through.
        await new Promise((r) => setTimeout(r, 5));
        await adapter.flush();
        await adapter.close();
      })();
      return closing;
    },
    [Symbol.asyncDispose]() {
      return client.close();
    },
  };
  return client;
}

/** Starts the relay and an inspector client connected to it. */
export async function startInspector(opts: StartInspectorOptions = {}): Promise<InspectorHandle> {
  const relay: InspectorRelay = await startInspectorRelay({
    port: opts.port,
    host: opts.host,
    inspectorUrl: opts.inspectorUrl,
    allowOrigins: opts.allowOrigins,
    allowHosts: opts.allowHosts,
  });
  const client = connectInspector(relay.producerUrl);
  if (opts.open) openBrowser(relay.url);
  let closing: Promise<void> | null = null;
  const handle: InspectorHandle = {
    inspect: client.inspect,
    url: relay.url,
    wsUrl: relay.wsUrl,
    producerUrl: relay.producerUrl,
    port: relay.port,
    get sent() {
      return client.sent;
    },
    close() {
      closing ??= (async () => {
        await client.close();
        await relay.close();
      })();
      return closing;
    },
    [Symbol.asyncDispose]() {
      return handle.close();
    },
  };
  return handle;
}
