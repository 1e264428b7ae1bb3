/**
 * What every reader of the events stream (replay, a durable subscription) does with a stored
 * message: decode it (upcast, validate) or store its dead letter with the bytes and the reason,
 * report it to `onDeadLetter`, and carry on.
 */
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { AkbeEvent } from './catalog.js';
import { decodeStoredEvent } from './codec.js';
import { type DeadLetterReport, deadLetterFromStream } from './dead-letter.js';
import { InvalidEventError, UnsupportedEventVersionError } from './errors.js';
import type { DeadLetterReason } from './subjects.js';
import { UPCASTERS, type UpcasterRegistry } from './upcast.js';

/** An event as read back from the stream: its stream sequence, subject and decoded (upcast) event. */
export interface StoredEvent {
  seq: number;
  subject: string;
  event: AkbeEvent;
}

export interface StoredMessageOptions {
  /** Called for every message a reader sent to the dead letters (default: one line on stderr). */
  onDeadLetter?: (report: DeadLetterReport) => void;
  upcasters?: UpcasterRegistry;
}

function defaultDeadLetterReporter(r: DeadLetterReport): void {
  process.stderr.write(
    `akbe: dead-lettered ${r.originalSubject}${r.origin ? ` (seq ${r.origin.seq})` : ''}: ${r.reason}: ${r.detail} -> ${r.deadLetterSubject}\n`,
  );
}

export class StoredMessages {
  constructor(
    private readonly js: JetStreamClient,
    private readonly opts: StoredMessageOptions,
  ) {}

  /** Decodes a stream message; on failure stores its dead letter and returns null. */
  async decodeOrDeadLetter(m: JsMsg, detectedBy: string): Promise<AkbeEvent | null> {
    try {
      const event = decodeStoredEvent(m.subject, m.data, this.opts.upcasters ?? UPCASTERS);
      event.meta.seq = m.seq;
      return event;
    } catch (err) {
      const reason: DeadLetterReason =
        err instanceof InvalidEventError
          ? 'invalid'
          : err instanceof UnsupportedEventVersionError
            ? 'unsupported-version'
            : 'undecodable';
      await this.deadLetter(m, reason, (err as Error).message, detectedBy);
      return null;
    }
  }

  async deadLetter(m: JsMsg, reason: DeadLetterReason, detail: string, detectedBy: string): Promise<void> {
    const report = await deadLetterFromStream(this.js, m, reason, detail, detectedBy);
    (this.opts.onDeadLetter ?? defaultDeadLetterReporter)(report);
  }
}
