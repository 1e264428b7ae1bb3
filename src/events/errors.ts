/**
 * One error class per failure of the event backbone. Each sets `name`, chains `cause` and carries
 * the domain fields a caller needs to branch or report (`instanceof`, never string matching).
 */

/** An event (or a decoded message) does not match its type's schema. `path` names the field. */
export class InvalidEventError extends Error {
  constructor(
    readonly eventType: string,
    readonly path: string,
    readonly problem: string,
    opts?: ErrorOptions,
  ) {
    super(`${eventType}: ${path} ${problem}`, opts);
    this.name = 'InvalidEventError';
  }
}

/** The bytes of a message are not msgpack, or not an event envelope at all. */
export class UndecodableEventError extends Error {
  constructor(message: string, opts?: ErrorOptions) {
    super(message, opts);
    this.name = 'UndecodableEventError';
  }
}

/** An event was written with a schema version this code cannot read (newer, or no upcaster). */
export class UnsupportedEventVersionError extends Error {
  constructor(
    readonly eventType: string,
    readonly version: number,
    readonly current: number,
  ) {
    super(`${eventType}: schema version v${version} is not readable (this build reads up to v${current})`);
    this.name = 'UnsupportedEventVersionError';
  }
}

/** A run id that cannot be a NATS subject token. */
export class InvalidRunIdError extends Error {
  constructor(readonly runId: string) {
    super(
      `invalid run id ${JSON.stringify(runId)}: use 1-64 characters from [A-Za-z0-9_-] (it becomes a NATS subject token)`,
    );
    this.name = 'InvalidRunIdError';
  }
}

/** An upcaster for (type, fromVersion) was registered twice with different functions. */
export class DuplicateUpcasterError extends Error {
  constructor(
    readonly eventType: string,
    readonly fromVersion: number,
  ) {
    super(`an upcaster for ${eventType} v${fromVersion} is already registered`);
    this.name = 'DuplicateUpcasterError';
  }
}

/** JetStream refused an append because an expectation (last sequence) failed: code 10071. */
export class ConcurrencyError extends Error {
  constructor(
    readonly subject: string,
    readonly code: number,
    opts?: ErrorOptions,
  ) {
    super(`append to ${subject} conflicts with a concurrent writer (JetStream code ${code})`, opts);
    this.name = 'ConcurrencyError';
  }
}

/** An append (or some of a windowed batch) was not acknowledged by JetStream. */
export class AppendError extends Error {
  constructor(
    message: string,
    /** Dedupe ids of the events that were not stored. */
    readonly failedDedupeIds: string[],
    opts?: ErrorOptions,
  ) {
    super(message, opts);
    this.name = 'AppendError';
  }
}

/**
 * JetStream acked an append as a duplicate, but what it holds under the event's Nats-Msg-Id is not
 * that event (another subject, type or identity): someone who knew the run's message ids stored a
 * message first, and the real event was dropped. The run must fail: its log misses its own event.
 */
export class PreemptedAppendError extends Error {
  constructor(
    readonly dedupeId: string,
    readonly seq: number,
    readonly storedSubject: string,
    why: string,
  ) {
    super(
      `event ${dedupeId} was not stored: JetStream holds another message under its id (seq ${seq}, ${storedSubject}: ${why}); someone who could read the run's message ids wrote it first`,
    );
    this.name = 'PreemptedAppendError';
  }
}

/** A JetStream stream the store needs is missing or cannot be created/read. */
export class EventStoreError extends Error {
  constructor(
    message: string,
    readonly code?: number,
    opts?: ErrorOptions,
  ) {
    super(message, opts);
    this.name = 'EventStoreError';
  }
}

/** A dead letter could not be written: the original message is then left unacked, never dropped. */
export class DeadLetterWriteError extends Error {
  constructor(
    readonly originalSubject: string,
    opts?: ErrorOptions,
  ) {
    super(`could not write the dead letter for a message on ${originalSubject}`, opts);
    this.name = 'DeadLetterWriteError';
  }
}
