/**
 * The edge of a NATS participant: every message that enters a service, worker or the learner is
 * decoded and validated here before any handler sees it. A message that fails is never handed on
 * and never throws out of a subscription callback (which would crash the process):
 *
 * - a request with a reply subject is ANSWERED with the error (the caller learns why at once);
 * - anything else (a publish with no reply subject, a stored command or event) is DEAD-LETTERED
 *   with its bytes and reason (dead-letter.ts), so no bad message vanishes unaccounted.
 *
 * `EdgeGate.stats` counts both outcomes; the fuzz test checks that they add up to what it sent.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { jetstream } from '@nats-io/jetstream';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { DLQ_HEADERS, writeDeadLetter } from './dead-letter.js';
import { SchemaViolation } from './schema.js';
import type { DeadLetterReason } from './subjects.js';

/** A message refused at the edge: `reason` is its dead-letter reason, the message names the field. */
export class EdgeRejectedError extends Error {
  constructor(
    readonly reason: Extract<DeadLetterReason, 'undecodable' | 'invalid' | 'handler-failed'>,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(message, opts);
    this.name = 'EdgeRejectedError';
  }
}

/** Runs a decoder: any failure becomes an EdgeRejectedError (`undecodable` unless it was a schema check). */
export function decodeAtEdge<T>(what: string, decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    if (err instanceof EdgeRejectedError) throw err;
    if (err instanceof SchemaViolation)
      throw new EdgeRejectedError('invalid', `${what}: ${err.message}`, { cause: err });
    throw new EdgeRejectedError('undecodable', `${what}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Where every akbe client takes its replies (nats.js's default inbox prefix). A service answers
 * only there: a request whose reply subject is anything else (`$JS.API.STREAM.PURGE.AKBE_EVENTS`,
 * an event subject, another service) would have the service publish to it with the service's
 * own permissions, which are the orchestrator's when the roles run in its process (a confused
 * deputy: the requester needs no permission on a reply subject).
 */
export const INBOX_PREFIX = '_INBOX.';
/**
 * The reply subject nats-server gives a request that came through a service import (a role in
 * an account of its own, src/actors/nats/nats-accounts.ts): the server maps it back to the
 * requester's inbox in the requester's account, and to nothing else.
 */
export const IMPORT_REPLY_PREFIX = '_R_.';

export function isInbox(subject: string): boolean {
  return [INBOX_PREFIX, IMPORT_REPLY_PREFIX].some((p) => subject.startsWith(p) && subject.length > p.length);
}

export interface EdgeStats {
  /** Messages that passed validation. */
  admitted: number;
  /** Bad requests answered with their error. */
  answered: number;
  /** Bad messages stored in AKBE_DEAD_LETTERS. */
  deadLettered: number;
  /** Dead letters that could not be written (each also reported to `log`). */
  lost: number;
  /**
   * Bad messages that were dead letters already, delivered back by a consumer on the dead-letter
   * stream: not stored again (each new letter would be delivered again, a loop that fills it).
   */
  dropped: number;
}

export interface EdgeGateOptions {
  /** Who checks, for the dead letter's `Akbe-Detected-By` (e.g. `svc.generate`). */
  detectedBy: string;
  /** Answers a bad request in the service's own wire format. */
  respondError?: (msg: Msg, err: EdgeRejectedError) => void;
  log?: (line: string) => void;
}

export class EdgeGate {
  readonly stats: EdgeStats = { admitted: 0, answered: 0, deadLettered: 0, lost: 0, dropped: 0 };
  private readonly pending = new Set<Promise<void>>();
  private readonly js: JetStreamClient;

  constructor(
    nc: NatsConnection,
    private readonly opts: EdgeGateOptions,
  ) {
    this.js = jetstream(nc);
  }

  /**
   * Decodes a core-NATS request; returns null when it was refused (answered or dead-lettered).
   * A request needs a reply subject when `needsReply` (a request/reply service): one without is
   * dead-lettered even when valid, since nothing could ever see its result.
   */
  admit<T>(msg: Msg, decode: (data: Uint8Array) => T, needsReply = true): T | null {
    let value: T;
    try {
      if (msg.reply && !isInbox(msg.reply))
        throw new EdgeRejectedError(
          'invalid',
          `${this.opts.detectedBy}: reply subject ${msg.reply} is not an inbox (${INBOX_PREFIX}...); answering it would publish there with this service's permissions`,
        );
      value = decodeAtEdge(this.opts.detectedBy, () => decode(msg.data));
      if (needsReply && !msg.reply)
        throw new EdgeRejectedError('invalid', `${this.opts.detectedBy}: a request needs a reply subject`);
    } catch (err) {
      this.reject(msg, err as EdgeRejectedError);
      return null;
    }
    this.stats.admitted++;
    return value;
  }

  /** Refuses a core-NATS message: answers it when it can, dead-letters it otherwise. */
  reject(msg: Msg, err: EdgeRejectedError): void {
    if (msg.reply && isInbox(msg.reply) && this.opts.respondError) {
      try {
        this.opts.respondError(msg, err);
        this.stats.answered++;
        return;
      } catch {
        // the requester is gone: keep the message as a dead letter instead
      }
    }
    if (msg.headers?.get(DLQ_HEADERS.detectedBy)) {
      this.stats.dropped++;
      if (this.stats.dropped === 1)
        this.opts.log?.(
          `${this.opts.detectedBy}: a dead letter was delivered here (a consumer on the dead-letter stream?): ${err.message}; not stored again`,
        );
      return;
    }
    this.track(this.deadLetter(msg.subject, msg.data, err));
  }

  /**
   * Stores the dead letter of a bad message (from a stream when `origin` is given); resolves true
   * once stored, false when it could not be (the caller then must not ack the original).
   */
  async deadLetter(
    subject: string,
    bytes: Uint8Array,
    err: EdgeRejectedError,
    origin?: { stream: string; seq: number },
  ): Promise<boolean> {
    try {
      await writeDeadLetter(this.js, {
        subject,
        bytes,
        reason: err.reason,
        detail: err.message,
        detectedBy: this.opts.detectedBy,
        origin,
      });
      this.stats.deadLettered++;
      return true;
    } catch (e) {
      this.stats.lost++;
      this.opts.log?.(
        `${this.opts.detectedBy}: dead letter not stored (${err.message}): ${(e as Error).message}`,
      );
      return false;
    }
  }

  private track(p: Promise<unknown>): void {
    const q = p.then(() => undefined);
    this.pending.add(q);
    void q.finally(() => this.pending.delete(q));
  }

  /** Waits for the dead letters being written (call before closing the connection). */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }
}
