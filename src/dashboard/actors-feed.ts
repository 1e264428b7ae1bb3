/**
 * The live actor tree for the actors page, read from inspector relays (`akbe train --inspect`,
 * src/actors/inspect/inspect-relay.ts) as one more WebSocket viewer: the relay first replays every actor
 * registration it kept, then relays each new inspection event. The dashboard never sends on it.
 *
 * Per actor: its parent, its statechart definition (deduplicated: thousands of rollouts share one),
 * its current state value and status, and its last few events. Changes are handed out in batches
 * (every `flushMs`) so a busy step does not become one page update per event. A relay that is not
 * up yet, or goes away, is retried with backoff; `relays()` says which are connected.
 */
import { WebSocket } from 'ws';

export interface ActorInfo {
  sessionId: string;
  name: string;
  parentId: string | null;
  /** Key into `definitions`; null for actors without a statechart (promise actors). */
  definition: string | null;
  /** The machine's id (`rollout`, `question`, …), null for promise actors. */
  machine: string | null;
  /**
   * What the actor works on, from its context (rolloutId, else questionId): a rollout machine in
   * a worker process is a root actor named `rollout`, and this ties it to its question's dispatch.
   */
  key: string | null;
  value: unknown;
  status: string;
  /** Newest last. */
  events: Array<{ type: string; at: number }>;
  updatedAt: number;
}

export interface RelayLink {
  url: string;
  connected: boolean;
}

export interface ActorsDelta {
  relays: RelayLink[];
  actors: ActorInfo[];
  definitions: Record<string, unknown>;
}

const RECENT_EVENTS = 8;

/** A short stable key for a definition string (FNV-1a), so equal charts are sent once. */
function keyOf(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return `d${(h >>> 0).toString(16)}`;
}

interface Link extends RelayLink {
  ws: WebSocket | null;
  retry: NodeJS.Timeout | null;
  backoffMs: number;
}

export class ActorsFeed {
  private readonly actors = new Map<string, ActorInfo>();
  private readonly definitions = new Map<string, unknown>();
  private readonly links: Link[];
  private readonly listeners = new Set<(d: ActorsDelta) => void>();
  private changed = new Set<string>();
  private newDefinitions = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private running = true;

  constructor(
    urls: readonly string[],
    private readonly opts: { maxActors?: number; flushMs?: number } = {},
  ) {
    this.links = urls.map((url) => ({ url, connected: false, ws: null, retry: null, backoffMs: 250 }));
    for (const link of this.links) this.connect(link);
  }

  private connect(link: Link): void {
    const ws = new WebSocket(link.url);
    link.ws = ws;
    ws.on('open', () => {
      link.connected = true;
      link.backoffMs = 250;
      this.touchLinks();
    });
    ws.on('message', (data, isBinary) => {
      if (!isBinary) this.receive(data.toString());
    });
    ws.on('error', () => undefined); // 'close' follows and schedules the retry
    ws.on('close', () => {
      link.ws = null;
      if (link.connected) {
        link.connected = false;
        this.touchLinks();
      }
      if (!this.running) return;
      link.retry = setTimeout(() => this.connect(link), link.backoffMs);
      link.retry.unref();
      link.backoffMs = Math.min(link.backoffMs * 2, 5_000);
    });
  }

  /** One relayed inspection event (JSON). Anything malformed is ignored: it is display data. */
  receive(text: string): void {
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof m !== 'object' || m === null || typeof m.sessionId !== 'string') return;
    const sessionId = m.sessionId;
    const at = Number(m.createdAt) || Date.now();
    const snapshot = (m.snapshot ?? {}) as { value?: unknown; status?: unknown; context?: unknown };
    const context = (snapshot.context ?? {}) as { rolloutId?: unknown; questionId?: unknown };
    const key =
      typeof context.rolloutId === 'string'
        ? context.rolloutId
        : typeof context.questionId === 'string'
          ? context.questionId
          : null;
    if (m.type === '@xstate.actor') {
      let definition: string | null = null;
      if (typeof m.definition === 'string' && m.definition.includes('"states"')) {
        definition = keyOf(m.definition);
        if (!this.definitions.has(definition)) {
          try {
            this.definitions.set(definition, JSON.parse(m.definition));
            this.newDefinitions.add(definition);
          } catch {
            definition = null;
          }
        }
      }
      const machine = definition ? (this.definitions.get(definition) as { id?: unknown }).id : null;
      const old = this.actors.get(sessionId);
      this.actors.set(sessionId, {
        sessionId,
        name: typeof m.name === 'string' ? m.name : sessionId,
        parentId: typeof m.parentId === 'string' ? m.parentId : null,
        definition,
        machine: typeof machine === 'string' ? machine : null,
        key: key ?? old?.key ?? null,
        value: snapshot.value ?? old?.value ?? null,
        status: typeof snapshot.status === 'string' ? snapshot.status : (old?.status ?? 'active'),
        events: old?.events ?? [],
        updatedAt: at,
      });
      this.evict();
    } else {
      const actor = this.actors.get(sessionId);
      if (!actor) return;
      if (m.type === '@xstate.snapshot') {
        if ('value' in snapshot) actor.value = snapshot.value;
        actor.key ??= key;
        if (typeof snapshot.status === 'string') actor.status = snapshot.status;
      } else if (m.type === '@xstate.event') {
        const type = (m.event as { type?: unknown } | undefined)?.type;
        if (typeof type !== 'string') return;
        actor.events.push({ type, at });
        if (actor.events.length > RECENT_EVENTS) actor.events.shift();
      } else return;
      actor.updatedAt = at;
    }
    this.changed.add(sessionId);
    this.schedule();
  }

  /** Bounded memory: past `maxActors`, the oldest finished actors go first. */
  private evict(): void {
    const max = this.opts.maxActors ?? 5_000;
    if (this.actors.size <= max) return;
    for (const [id, a] of this.actors) {
      if (this.actors.size <= max) break;
      if (a.status !== 'active') this.actors.delete(id);
    }
  }

  private touchLinks(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || !this.running) return;
    this.timer = setTimeout(() => this.flush(), this.opts.flushMs ?? 200);
    this.timer.unref();
  }

  private flush(): void {
    this.timer = null;
    const delta: ActorsDelta = {
      relays: this.relays(),
      actors: [...this.changed].flatMap((id) => {
        const a = this.actors.get(id);
        return a ? [a] : [];
      }),
      definitions: Object.fromEntries([...this.newDefinitions].map((k) => [k, this.definitions.get(k)])),
    };
    this.changed = new Set();
    this.newDefinitions = new Set();
    for (const fn of this.listeners) fn(delta);
  }

  relays(): RelayLink[] {
    return this.links.map(({ url, connected }) => ({ url, connected }));
  }

  snapshot(): ActorsDelta {
    return {
      relays: this.relays(),
      actors: [...this.actors.values()],
      definitions: Object.fromEntries(this.definitions),
    };
  }

  onChange(fn: (d: ActorsDelta) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  close(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    for (const link of this.links) {
      if (link.retry) clearTimeout(link.retry);
      link.ws?.terminate();
    }
    this.listeners.clear();
  }
}
