/**
 * Upcasters turn a stored event of an older schema version into the current one, one version at a
 * time (v1 -> v2 -> v3), so replay decodes old msgpack forever. None exist yet: every type is at
 * v1. To change a payload: bump CURRENT_VERSION[type], then
 *
 *   UPCASTERS.register('learner.step', 1, (data) => ({ ...data, extra: {} }));
 *
 * Upcasters are pure functions of (data, meta); they never read the clock or the network.
 */
import { CURRENT_VERSION, type EventMeta, type EventType } from './catalog.js';
import { DuplicateUpcasterError, UnsupportedEventVersionError } from './errors.js';

/** Maps `data` of version `fromVersion` to version `fromVersion + 1`. */
export type Upcaster = (data: unknown, meta: EventMeta) => unknown;

export interface RawEvent {
  type: string;
  v: number;
  data: unknown;
  meta: unknown;
}

export class UpcasterRegistry {
  private readonly table = new Map<string, Upcaster>();

  constructor(private readonly current: Readonly<Record<string, number>> = CURRENT_VERSION) {}

  register(type: EventType | string, fromVersion: number, fn: Upcaster): void {
    const key = `${type}@${fromVersion}`;
    const prev = this.table.get(key);
    if (prev && prev !== fn) throw new DuplicateUpcasterError(type, fromVersion);
    this.table.set(key, fn);
  }

  /** Returns the event at its type's current version (the same object when already current). */
  upcast<T extends RawEvent>(raw: T): T {
    if (!Object.hasOwn(this.current, raw.type)) return raw; // unknown types fail validation later
    const current = this.current[raw.type];
    if (raw.v === current) return raw;
    if (!Number.isSafeInteger(raw.v) || raw.v > current || raw.v < 1) {
      throw new UnsupportedEventVersionError(raw.type, raw.v, current);
    }
    let data = raw.data;
    for (let v = raw.v; v < current; v++) {
      const step = this.table.get(`${raw.type}@${v}`);
      if (!step) throw new UnsupportedEventVersionError(raw.type, raw.v, current);
      data = step(data, raw.meta as EventMeta);
    }
    return { ...raw, v: current, data };
  }
}

/** The registry the codec uses. */
export const UPCASTERS = new UpcasterRegistry();
