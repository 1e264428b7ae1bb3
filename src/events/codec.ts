/**
 * The event codec: msgpack via msgpackr with
 * - `moreTypes`: Int32Array / Float32Array / Uint8Array round-trip as themselves (token ids,
 *   logprobs, masks), copied out of the message buffer on decode;
 * - `useRecords`: objects are encoded as msgpackr records, whose key lists are written INLINE in
 *   every message. No `structures` array is passed and `sequential` is off, so nothing is shared
 *   between messages: any fresh decoder (another process, next year's build) decodes any single
 *   message on its own. Tests check this with a separate Unpackr.
 *
 * Decoding is strict: bytes that are not msgpack, or not an event envelope, throw
 * UndecodableEventError; an old version is upcast; the result is validated (InvalidEventError).
 */
import { Packr, Unpackr } from 'msgpackr';
import { type AkbeEvent, validateEvent } from './catalog.js';
import { InvalidEventError, UndecodableEventError } from './errors.js';
import { type RawEvent, UPCASTERS, type UpcasterRegistry } from './upcast.js';

export const CODEC_OPTIONS = { useRecords: true, moreTypes: true } as const;

const packr = new Packr(CODEC_OPTIONS);
const unpackr = new Unpackr(CODEC_OPTIONS);

/** Encodes an event. `meta.seq` is dropped: the stream assigns it. */
export function encodeEvent(event: AkbeEvent): Uint8Array {
  if (event.meta.seq === undefined) return packr.pack(event);
  const { seq: _seq, ...meta } = event.meta;
  return packr.pack({ ...event, meta });
}

/** Decodes without validation: the raw envelope, or UndecodableEventError. */
export function decodeRaw(bytes: Uint8Array): RawEvent {
  let value: unknown;
  try {
    value = unpackr.unpack(bytes);
  } catch (err) {
    throw new UndecodableEventError(`not msgpack: ${(err as Error).message}`, { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UndecodableEventError(
      `not an event envelope: decoded to ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`,
    );
  }
  const raw = value as Partial<RawEvent>;
  if (typeof raw.type !== 'string' || typeof raw.v !== 'number' || !('data' in raw) || !('meta' in raw)) {
    throw new UndecodableEventError('not an event envelope: needs type (string), v (number), data and meta');
  }
  return raw as RawEvent;
}

/** Decodes, upcasts to the current version and validates. */
export function decodeEvent(bytes: Uint8Array, upcasters: UpcasterRegistry = UPCASTERS): AkbeEvent {
  return validateEvent(upcasters.upcast(decodeRaw(bytes)));
}

/**
 * Decodes an event read from `subject`: it must be stored where it says it belongs
 * (`akbe.<meta.runId>.evt.<type>`), or it was written by something that is not an akbe sink
 * (a forged or misrouted message) and is refused like a malformed one.
 */
export function decodeStoredEvent(
  subject: string,
  bytes: Uint8Array,
  upcasters: UpcasterRegistry = UPCASTERS,
): AkbeEvent {
  const event = decodeEvent(bytes, upcasters);
  const expected = `akbe.${event.meta.runId}.evt.${event.type}`;
  if (subject !== expected)
    throw new InvalidEventError(event.type, 'subject', `must be ${expected} (stored on ${subject})`);
  return event;
}

/**
 * A JSON-ready copy: typed arrays become plain number arrays. Faster than a replacer, which
 * JSON.stringify would call once per array element.
 */
export function toJsonValue(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (ArrayBuffer.isView(value)) return Array.from(value as unknown as ArrayLike<number>);
  if (Array.isArray(value)) return value.map(toJsonValue);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = toJsonValue(v);
  return out;
}

/** One JSONL line for an event (with its stream sequence in meta.seq when known). */
export function eventToJsonLine(event: AkbeEvent): string {
  return JSON.stringify(toJsonValue(event));
}
