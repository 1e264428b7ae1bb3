/**
 * The dashboard's window on NATS, read-only: it creates no stream, appends nothing and
 * dead-letters nothing (a viewer has no business writing; `akbe events dead-letters` is where bad
 * messages are dealt with). Two kinds of read:
 *
 * - bounded reads of the event stream (`readStream`: ordered, ephemeral consumers) for a page's
 *   data: the runs list, one run's step events, one run's whole log for a question or an audit;
 * - live pushes: core subscriptions to the run-level subjects (RUN_LEVEL: run.started,
 *   step.started, learner.step, policy.published, run.finished), which see every event as it is published,
 *   carry none of the rollouts' token arrays, and are renewed by the client after a reconnect.
 *
 * The connection keeps retrying forever, so a dashboard outlives a NATS restart; `onStatus`
 * tells the page when the link dropped and when it came back (the page then re-reads).
 */
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { RUN_LEVEL, readRunLevelEvents } from '../../audit/runs-list.js';
import type { DashboardSource, NatsLinkStatus } from '../../dashboard/source.js';
import type { AkbeEvent, EventType } from '../../events/catalog.js';
import { decodeEvent } from '../../events/codec.js';
import { readStream } from '../../events/stream-reader.js';
import { EVENTS_STREAM, eventSubject, runEventsFilter } from '../../events/subjects.js';
import { type AkbeNats, type ConnectAkbeOptions, connectAkbeNats } from '../nats/connection.js';

/** JetStream's "stream not found" (no run was ever recorded here): an empty store, not an error. */
function isMissingStream(err: unknown): boolean {
  return /stream not found/i.test(String((err as Error)?.message ?? err));
}

export async function openDashboardSource(
  opts: Pick<ConnectAkbeOptions, 'url' | 'home' | 'env'> = {},
): Promise<DashboardSource> {
  const nats: AkbeNats = await connectAkbeNats({
    ...opts,
    name: 'akbe-dashboard',
    role: 'viewer', // read-only credentials where the server has accounts (docs/security.md)
    reconnectForever: true,
  });
  return new NatsDashboardSource(nats);
}

class NatsDashboardSource implements DashboardSource {
  status: NatsLinkStatus;
  undecodable = 0;
  private readonly eventFns = new Set<(e: AkbeEvent) => void>();
  private readonly statusFns = new Set<(s: NatsLinkStatus) => void>();
  private readonly subs: Subscription[];
  private readonly nc: NatsConnection;

  constructor(private readonly nats: AkbeNats) {
    this.nc = nats.nc;
    this.status = { connected: true, url: nats.url };
    this.subs = RUN_LEVEL.map((type) =>
      this.nc.subscribe(`akbe.*.evt.${type}`, {
        callback: (err, m) => {
          if (err) return;
          const event = this.decode(m.data);
          if (event) for (const fn of this.eventFns) fn(event);
        },
      }),
    );
    void this.watchStatus();
  }

  private decode(bytes: Uint8Array): AkbeEvent | null {
    try {
      return decodeEvent(bytes);
    } catch {
      this.undecodable++;
      return null;
    }
  }

  private setStatus(s: NatsLinkStatus): void {
    this.status = s;
    for (const fn of this.statusFns) fn(s);
  }

  private async watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === 'disconnect')
        this.setStatus({ connected: false, url: this.nats.url, detail: 'disconnected' });
      else if (s.type === 'reconnect') this.setStatus({ connected: true, url: this.nats.url });
      else if (s.type === 'error')
        this.setStatus({
          ...this.status,
          detail: String((s as { error?: Error }).error?.message ?? 'error'),
        });
    }
  }

  async runLevelEvents(): Promise<Map<string, AkbeEvent[]>> {
    try {
      const { byRun, undecodable } = await readRunLevelEvents({ js: jetstream(this.nc) });
      this.undecodable += undecodable;
      return byRun;
    } catch (err) {
      if (isMissingStream(err)) return new Map();
      throw err;
    }
  }

  async runEvents(runId: string, types?: readonly EventType[]): Promise<AkbeEvent[]> {
    const js = jetstream(this.nc);
    const filters = types ? types.map((t) => eventSubject(runId, t)) : [runEventsFilter(runId)];
    const out: AkbeEvent[] = [];
    try {
      // nats-server 2.9 takes one filter subject per consumer: one bounded read per type.
      for (const filter of filters)
        for await (const m of readStream(js, EVENTS_STREAM, filter)) {
          const event = this.decode(m.data);
          if (!event) continue;
          event.meta.seq = m.seq;
          out.push(event);
        }
    } catch (err) {
      if (isMissingStream(err)) return [];
      throw err;
    }
    return out.sort((a, b) => (a.meta.seq ?? 0) - (b.meta.seq ?? 0));
  }

  onEvent(fn: (event: AkbeEvent) => void): () => void {
    this.eventFns.add(fn);
    return () => this.eventFns.delete(fn);
  }

  onStatus(fn: (status: NatsLinkStatus) => void): () => void {
    this.statusFns.add(fn);
    return () => this.statusFns.delete(fn);
  }

  async close(): Promise<void> {
    for (const s of this.subs) s.unsubscribe();
    this.eventFns.clear();
    this.statusFns.clear();
    await this.nats.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
