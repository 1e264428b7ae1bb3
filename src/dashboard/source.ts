/**
 * What the dashboard reads from, as the dashboard needs it: the port it owns. The NATS
 * implementation is src/actors/inspect/dashboard-source.ts; tests can pass any other.
 */
import type { AkbeEvent, EventType } from '../events/catalog.js';

export interface NatsLinkStatus {
  connected: boolean;
  url: string;
  /** Why the link is down (the last error or 'disconnected'), when it is. */
  detail?: string;
}

export interface DashboardSource extends AsyncDisposable {
  readonly status: NatsLinkStatus;
  /** Messages that could not be decoded, skipped (never dead-lettered from here). */
  readonly undecodable: number;
  /** Every run-level event of every run, by run, in stream order (each with `meta.seq`). */
  runLevelEvents(): Promise<Map<string, AkbeEvent[]>>;
  /** One run's events of the given types (all types when omitted), in stream order. */
  runEvents(runId: string, types?: readonly EventType[]): Promise<AkbeEvent[]>;
  /** Live run-level events of every run; returns the unsubscribe. */
  onEvent(fn: (event: AkbeEvent) => void): () => void;
  onStatus(fn: (status: NatsLinkStatus) => void): () => void;
  close(): Promise<void>;
}
