/**
 * Event timestamps (`meta.at`): milliseconds since the Unix epoch, with a fractional part of
 * microsecond resolution, read from the process's monotonic clock (`performance.timeOrigin +
 * performance.now()`, hrtime underneath). Within one process `at` strictly increases from event
 * to event, even when the wall clock is stepped back (NTP) or two events fall in the same
 * microsecond: each reading is at least 1 µs after the previous one. Across processes `at` is
 * only as comparable as the hosts' clocks; the JetStream sequence is the authoritative order.
 *
 * Pure code never reads the clock: time enters on metadata (`createEvent(..., { at })`), and
 * tests pass a `ManualClock`.
 */

export interface EventClock {
  /** The next timestamp, ms since epoch (µs resolution), strictly greater than the last one. */
  now(): number;
}

const STEP_MS = 0.001;

/** The process clock. */
export class MonotonicClock implements EventClock {
  private last = 0;

  now(): number {
    const reading = Math.round((performance.timeOrigin + performance.now()) * 1000) / 1000;
    // Rounding keeps the value on the µs grid so that JSON export prints it cleanly.
    this.last = reading > this.last ? reading : Math.round((this.last + STEP_MS) * 1000) / 1000;
    return this.last;
  }
}

/** A clock tests move by hand. */
export class ManualClock implements EventClock {
  constructor(private t = Date.UTC(2026, 0, 1)) {}

  now(): number {
    const t = this.t;
    this.t += 1;
    return t;
  }

  advance(ms: number): void {
    this.t += ms;
  }
}

export const processClock: EventClock = new MonotonicClock();
