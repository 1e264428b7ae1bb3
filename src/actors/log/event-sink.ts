/**
 * Catalog events -> the JetStream event log. `EventSink` buffers events and appends them in
 * windows (`store.appendMany`), in report order; `flush()` resolves once everything reported so far
 * is stored. A sink created with `known` dedupe ids (a resumed run's log) skips events already in
 * the log, so a resume never writes a fact twice even after JetStream's duplicate window has
 * passed. The facts -> events mapping it is fed with is fact-events.ts (pure).
 */
import type { AkbeEvent } from '../../events/catalog.js';
import type { EventStore } from '../../events/store.js';

export interface EventSinkOptions {
  /** Publishes in flight per window (default 256). */
  window?: number;
  /** Events already in the log (a resumed run): never appended again. */
  known?: Set<string>;
  /** Called for every event stored (after its append was acked). */
  onStored?: (event: AkbeEvent) => void;
}

/**
 * Buffers events and appends them in order, one window at a time. `push` never throws for I/O:
 * a failed append is kept and re-thrown by the next `flush()` (the caller decides to stop).
 */
export class EventSink {
  private buffer: AkbeEvent[] = [];
  private chain: Promise<void> = Promise.resolve();
  private failure: Error | null = null;
  private scheduled = false;
  readonly stats = { appended: 0, skipped: 0, duplicates: 0 };
  /** Step and policy version of the last event pushed: where a failed run stopped. */
  lastPushed: { step: number; policyVersion: number } | null = null;

  constructor(
    private readonly store: EventStore,
    private readonly opts: EventSinkOptions = {},
  ) {}

  push(event: AkbeEvent | null): void {
    if (!event) return;
    this.lastPushed = { step: event.meta.step, policyVersion: event.meta.policyVersion };
    if (this.opts.known?.has(event.meta.dedupeId)) {
      this.stats.skipped++;
      return;
    }
    this.opts.known?.add(event.meta.dedupeId);
    this.buffer.push(event);
    if (!this.scheduled) {
      this.scheduled = true;
      // Appends start on the next turn so that a burst of facts (a step's labels) shares a window.
      setImmediate(() => {
        this.scheduled = false;
        this.drain();
      });
    }
  }

  private drain(): void {
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    this.chain = this.chain.then(async () => {
      if (this.failure) return;
      try {
        const results = await this.store.appendMany(batch, { window: this.opts.window ?? 256 });
        this.stats.appended += batch.length;
        this.stats.duplicates += results.filter((r) => r.duplicate).length;
        for (const e of batch) this.opts.onStored?.(e);
      } catch (err) {
        this.failure = err as Error;
      }
    });
  }

  /**
   * Stops appending for good (a run that lost its lock to another orchestrator must not write on):
   * what is pushed or waiting from now on is dropped, and `flush()` throws `reason`.
   */
  close(reason: Error): void {
    this.failure ??= reason;
    this.buffer = [];
  }

  /** Resolves once every event pushed so far is stored; throws the first append failure. */
  async flush(): Promise<void> {
    this.drain();
    await this.chain;
    if (this.failure) throw this.failure;
  }
}
