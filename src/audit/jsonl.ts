/**
 * Reading `akbe events export` JSON lines back into events, so an outside auditor can audit an
 * exported run with no NATS (`akbe replay --file run.jsonl`). The export writes typed arrays as
 * number arrays; they are restored by field, then every event is validated like a stored one.
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { type AkbeEvent, validateEvent } from '../events/catalog.js';
import { type RawEvent, UPCASTERS } from '../events/upcast.js';
import { parseSealLine } from './export-seal.js';

/** A line of the export that is not a valid event; `line` is 1-based. */
export class ExportLineError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(`${file}:${line}: ${message}`, opts);
    this.name = 'ExportLineError';
  }
}

type TypedCtor = Int32ArrayConstructor | Float32ArrayConstructor | Uint8ArrayConstructor;
const TYPED: Record<string, Record<string, TypedCtor>> = {
  'rollout.turn': { tokenIds: Int32Array },
  'tool.called': { observationTokenIds: Int32Array },
  'rollout.completed': {
    promptTokenIds: Int32Array,
    responseTokenIds: Int32Array,
    oldLogprobs: Float32Array,
    lossMask: Uint8Array,
  },
};

/**
 * One exported JSON line -> a validated event (typed arrays restored), upcast to the current
 * version like a stored one: an export written by an older build audits as its log would.
 */
export function parseEventJson(text: string): AkbeEvent {
  const raw = JSON.parse(text) as { type?: string; v?: unknown; data?: Record<string, unknown> };
  const fields = TYPED[raw.type ?? ''];
  if (fields && raw.data && typeof raw.data === 'object')
    for (const [key, Ctor] of Object.entries(fields))
      if (Array.isArray(raw.data[key])) raw.data[key] = Ctor.from(raw.data[key] as number[]);
  const envelope =
    typeof raw.type === 'string' && typeof raw.v === 'number' && 'data' in raw && 'meta' in raw;
  return validateEvent(envelope ? UPCASTERS.upcast(raw as RawEvent) : raw);
}

/** The events of an export file, in file order (the export is in stream order). */
export async function readExportFile(file: string): Promise<AkbeEvent[]> {
  const events: AkbeEvent[] = [];
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY });
  let n = 0;
  try {
    for await (const line of lines) {
      n++;
      if (line.trim() === '' || parseSealLine(line)) continue; // the seal: checked by export-seal.ts
      try {
        events.push(parseEventJson(line));
      } catch (err) {
        throw new ExportLineError(file, n, (err as Error).message, { cause: err });
      }
    }
  } catch (err) {
    if (err instanceof ExportLineError) throw err;
    throw new Error(`--file ${file}: ${(err as Error).message}`, { cause: err });
  }
  return events;
}
