/**
 * NATS subject names, all under the run prefix `akbe.<runId>`:
 *
 *   akbe.<run>.evt.<type>               events, e.g. akbe.r1.evt.rollout.completed (stream AKBE_EVENTS)
 *   akbe.<run>.cmd.rollout              rollout commands (queue group `rollout`)
 *   akbe.<run>.svc.generate|search|train  request/reply services (queue groups)
 *   akbe.<run>.dlq.<reason>.<key>       dead letters (stream AKBE_DEAD_LETTERS): the original bytes,
 *                                       with the original subject and reason in headers
 *
 * Event types keep their dots as subject tokens, so `akbe.r1.evt.rollout.>` selects every
 * rollout event of run r1. A run id is one subject token: validated by `assertRunId`.
 */
import { RUN_ID_PATTERN } from './catalog.js';
import { InvalidRunIdError } from './errors.js';

/** The JetStream stream that holds every run's events. */
export const EVENTS_STREAM = 'AKBE_EVENTS';
export const EVENTS_SUBJECTS = 'akbe.*.evt.>';
/** The work queue of rollout commands (akbe.<run>.cmd.rollout). */
export const COMMAND_STREAM = 'AKBE_COMMANDS';
export const COMMAND_SUBJECTS = 'akbe.*.cmd.>';
/** The object store bucket of every run's checkpoints. */
export const CHECKPOINT_BUCKET = 'akbe_checkpoints';
export const DEAD_LETTER_STREAM = 'AKBE_DEAD_LETTERS';
export const DEAD_LETTER_SUBJECTS = 'akbe.*.dlq.>';

export const DEAD_LETTER_REASONS = [
  'undecodable',
  'invalid',
  'unsupported-version',
  'handler-failed',
] as const;
export type DeadLetterReason = (typeof DEAD_LETTER_REASONS)[number];

export const SERVICES = ['generate', 'search', 'train'] as const;
export type ServiceName = (typeof SERVICES)[number];

/** Run id used for dead letters whose subject names no run. */
export const UNKNOWN_RUN = '_unknown';

export function assertRunId(runId: string): string {
  if (typeof runId !== 'string' || !RUN_ID_PATTERN.test(runId)) throw new InvalidRunIdError(String(runId));
  return runId;
}

export function runPrefix(runId: string): string {
  return `akbe.${assertRunId(runId)}`;
}

/** The subject an event of `type` of run `runId` is stored under. */
export function eventSubject(runId: string, type: string): string {
  return `${runPrefix(runId)}.evt.${type}`;
}

/** Every event of one run: the single filter subject of a replay (nats-server 2.9 takes one). */
export function runEventsFilter(runId: string): string {
  return `${runPrefix(runId)}.evt.>`;
}

export function commandSubject(runId: string, command: 'rollout'): string {
  return `${runPrefix(runId)}.cmd.${command}`;
}

/** The request subject of a run's service (generate, search, train). */
export function serviceSubject(runId: string, service: ServiceName): string {
  return `${runPrefix(runId)}.svc.${service}`;
}

/** `key` makes the dead letter of one stored message unique (`e<seq>`), or a fresh id otherwise. */
export function deadLetterSubject(runId: string, reason: DeadLetterReason, key: string): string {
  return `${runPrefix(runId)}.dlq.${reason}.${key.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

export function deadLetterFilter(runId?: string): string {
  return runId === undefined ? DEAD_LETTER_SUBJECTS : `${runPrefix(runId)}.dlq.>`;
}

export interface ParsedSubject {
  runId: string;
  kind: 'evt' | 'cmd' | 'svc' | 'dlq';
  /** The tokens after the kind, joined by dots (the event type for `evt`). */
  rest: string;
}

/** Parses an akbe subject; null when it is not one. */
export function parseSubject(subject: string): ParsedSubject | null {
  const m = /^akbe\.([^.]+)\.(evt|cmd|svc|dlq)\.(.+)$/.exec(subject);
  if (!m || !RUN_ID_PATTERN.test(m[1])) return null;
  return { runId: m[1], kind: m[2] as ParsedSubject['kind'], rest: m[3] };
}
