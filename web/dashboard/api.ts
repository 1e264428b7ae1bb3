/**
 * The page's link to the dashboard server: JSON reads and one EventSource. The EventSource
 * reconnects by itself (the server sends `retry: 1000`); each time it comes back the pages re-read
 * their data, since pushes sent while it was away are gone.
 */
import { html } from './html.js';

export async function getJson<T>(path: string): Promise<T> {
  const res = await fetch(path, { headers: { Accept: 'application/json' } });
  const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new Error((body as { error?: string }).error ?? `HTTP ${res.status}`);
  return body as T;
}

export interface NatsStatus {
  connected: boolean;
  url: string;
  detail?: string;
}

export interface LinkState {
  /** The dashboard server (the SSE stream). */
  server: 'connecting' | 'live' | 'lost';
  nats: NatsStatus | null;
  /** Times the stream came back after a loss (pages re-read each time). */
  reconnects: number;
  /** Times the server reported NATS down (a short outage may never be drawn: this counts it). */
  natsDrops: number;
}

type Listener = (data: unknown) => void;
const listeners = new Map<string, Set<Listener>>();
export let link: LinkState = { server: 'connecting', nats: null, reconnects: 0, natsDrops: 0 };

export function on(kind: string, fn: Listener): () => void {
  const set = listeners.get(kind) ?? new Set();
  listeners.set(kind, set);
  set.add(fn);
  return () => set.delete(fn);
}

function emit(kind: string, data: unknown): void {
  for (const fn of listeners.get(kind) ?? []) fn(data);
}

function setLink(next: Partial<LinkState>): void {
  link = { ...link, ...next };
  emit('link', link);
}

export function connectEvents(): void {
  const es = new EventSource('/api/events');
  let lost = false;
  es.addEventListener('hello', (m) => {
    const hello = JSON.parse((m as MessageEvent).data) as { nats: NatsStatus };
    const back = lost;
    lost = false;
    setLink({ server: 'live', nats: hello.nats, reconnects: link.reconnects + (back ? 1 : 0) });
    if (back) emit('resync', {});
  });
  es.onerror = () => {
    lost = true;
    setLink({ server: 'lost' });
  };
  es.addEventListener('nats', (m) => {
    const nats = JSON.parse((m as MessageEvent).data) as NatsStatus;
    setLink({ nats, natsDrops: link.natsDrops + (nats.connected ? 0 : 1) });
  });
  for (const kind of ['run', 'actors', 'resync'])
    es.addEventListener(kind, (m) => emit(kind, JSON.parse((m as MessageEvent).data)));
}

/** The banner over every page: whether what it shows is live. */
export function linkBanner(l: LinkState) {
  if (l.server === 'lost')
    return html`<div class="banner bad" data-link="lost">dashboard unreachable: reconnecting… (the page keeps what it has)</div>`;
  if (l.server === 'connecting') return html`<div class="banner" data-link="connecting">connecting…</div>`;
  if (l.nats && !l.nats.connected)
    return html`<div class="banner bad" data-link="nats-down">NATS at ${l.nats.url} unreachable (${l.nats.detail ?? 'disconnected'}): reconnecting…</div>`;
  const back = [
    l.reconnects ? `dashboard reconnected ${l.reconnects}×` : '',
    l.natsDrops ? `NATS back after ${l.natsDrops} outage${l.natsDrops > 1 ? 's' : ''}` : '',
  ].filter(Boolean);
  return html`<div class="banner ok" data-link="live" data-nats-drops=${l.natsDrops}>live${back.length ? ` (${back.join(', ')})` : ''}</div>`;
}
