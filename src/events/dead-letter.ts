/**
 * Dead letters: messages that could not be decoded, validated or handled. Each is stored in the
 * JetStream stream AKBE_DEAD_LETTERS (file storage, so it survives restarts) with
 * - the ORIGINAL bytes as the message data, untouched;
 * - headers `Akbe-Original-Subject`, `Akbe-Reason` (a DeadLetterReason), `Akbe-Detail` (one line:
 *   the error), `Akbe-Detected-By`, and, for a message that came from a stream,
 *   `Akbe-Original-Stream` and `Akbe-Original-Seq`;
 * - the subject `akbe.<run>.dlq.<reason>.<key>`: `key` is `e<seq>` for a stored event, so a
 *   message found bad by several readers (every replay sees it again) is kept once: the stream
 *   keeps one message per subject, and the Nats-Msg-Id dedupes within the duplicate window.
 *
 * Writing a dead letter is awaited; when it fails the caller must not ack or skip the original.
 */

import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { jetstream } from '@nats-io/jetstream';
import { headers, type NatsConnection, nuid } from '@nats-io/transport-node';
import { DeadLetterWriteError } from './errors.js';
import { retryElection } from './retry.js';
import {
  DEAD_LETTER_STREAM,
  type DeadLetterReason,
  deadLetterSubject,
  EVENTS_STREAM,
  parseSubject,
  UNKNOWN_RUN,
} from './subjects.js';

export const DLQ_HEADERS = {
  originalSubject: 'Akbe-Original-Subject',
  originalStream: 'Akbe-Original-Stream',
  originalSeq: 'Akbe-Original-Seq',
  reason: 'Akbe-Reason',
  detail: 'Akbe-Detail',
  detectedBy: 'Akbe-Detected-By',
} as const;

export interface DeadLetterInput {
  /** Subject the message was published on. */
  subject: string;
  bytes: Uint8Array;
  reason: DeadLetterReason;
  /** What went wrong, e.g. the error message. */
  detail: string;
  /** Who noticed, e.g. 'replay' or 'consumer:run-summary'. */
  detectedBy: string;
  /** Where the message is stored, when it came from a stream. */
  origin?: { stream: string; seq: number };
}

/** What readers report (store `onDeadLetter`): enough to find the stored dead letter. */
export interface DeadLetterReport {
  deadLetterSubject: string;
  originalSubject: string;
  reason: DeadLetterReason;
  detail: string;
  detectedBy: string;
  origin?: { stream: string; seq: number };
}

/** A stored dead letter, as read back. */
export interface DeadLetter extends DeadLetterReport {
  /** Sequence in AKBE_DEAD_LETTERS. */
  seq: number;
  bytes: Uint8Array;
  /** When it was dead-lettered, ms since epoch. */
  storedAt: number;
}

/** Header values are one line of printable text. */
function headerValue(s: string, max = 1000): string {
  const line = s.replace(/[\r\n]+/g, ' ').replace(/[^\x20-\x7e]/g, '?');
  return line.length > max ? `${line.slice(0, max - 3)}...` : line;
}

/** Stores a dead letter and returns its report; throws DeadLetterWriteError when not stored. */
export async function writeDeadLetter(
  js: JetStreamClient,
  input: DeadLetterInput,
): Promise<DeadLetterReport> {
  const runId = parseSubject(input.subject)?.runId ?? UNKNOWN_RUN;
  const key = input.origin
    ? `${input.origin.stream === EVENTS_STREAM ? 'e' : input.origin.stream}${input.origin.seq}`
    : nuid.next();
  const subject = deadLetterSubject(runId, input.reason, key);
  const h = headers();
  h.set(DLQ_HEADERS.originalSubject, headerValue(input.subject));
  h.set(DLQ_HEADERS.reason, input.reason);
  h.set(DLQ_HEADERS.detail, headerValue(input.detail));
  h.set(DLQ_HEADERS.detectedBy, headerValue(input.detectedBy));
  if (input.origin) {
    h.set(DLQ_HEADERS.originalStream, input.origin.stream);
    h.set(DLQ_HEADERS.originalSeq, String(input.origin.seq));
  }
  try {
    await retryElection(js, `dead letter ${subject}`, () =>
      js.publish(subject, input.bytes, {
        headers: h,
        msgID: `dlq:${key}:${input.reason}`,
        expect: { streamName: DEAD_LETTER_STREAM },
      }),
    );
  } catch (err) {
    throw new DeadLetterWriteError(input.subject, { cause: err });
  }
  const { subject: originalSubject, bytes: _bytes, ...rest } = input;
  return { deadLetterSubject: subject, originalSubject, ...rest };
}

/** The dead letter of a message read from a stream. */
export function deadLetterFromStream(
  js: JetStreamClient,
  m: JsMsg,
  reason: DeadLetterReason,
  detail: string,
  detectedBy: string,
) {
  return writeDeadLetter(js, {
    subject: m.subject,
    bytes: m.data,
    reason,
    detail,
    detectedBy,
    origin: { stream: m.info.stream, seq: m.seq },
  });
}

/** Reads a stored dead letter back. */
export function parseDeadLetter(m: JsMsg): DeadLetter {
  const h = m.headers;
  const get = (k: string) => h?.get(k) ?? '';
  const originStream = get(DLQ_HEADERS.originalStream);
  return {
    seq: m.seq,
    bytes: m.data,
    storedAt: Number(m.info.timestampNanos) / 1e6,
    deadLetterSubject: m.subject,
    originalSubject: get(DLQ_HEADERS.originalSubject),
    reason: get(DLQ_HEADERS.reason) as DeadLetterReason,
    detail: get(DLQ_HEADERS.detail),
    detectedBy: get(DLQ_HEADERS.detectedBy),
    ...(originStream ? { origin: { stream: originStream, seq: Number(get(DLQ_HEADERS.originalSeq)) } } : {}),
  };
}

/** For services that receive a bad core-NATS request: dead-letters it via a connection. */
export async function deadLetterRequest(
  nc: NatsConnection,
  subject: string,
  bytes: Uint8Array,
  reason: DeadLetterReason,
  detail: string,
  detectedBy: string,
) {
  return writeDeadLetter(jetstream(nc), { subject, bytes, reason, detail, detectedBy });
}
