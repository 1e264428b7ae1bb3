/**
 * A small progress reporter for long CLI jobs (index builds, data generation). On a TTY it
 * redraws one bar line in place; elsewhere (CI logs, pipes, files) it prints a plain line at
 * most every `intervalMs`, so logs stay readable instead of filling with carriage returns.
 */

export interface ProgressOptions {
  /** Total units; 0 or undefined shows a count without a bar. */
  total?: number;
  /** Where to draw (stderr by default). */
  stream?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  /** Minimum milliseconds between redraws (TTY) or lines (not a TTY). */
  intervalMs?: number;
  /** Clock, injectable for tests. */
  now?: () => number;
  /** Force the TTY or line mode (defaults to the stream's isTTY). */
  tty?: boolean;
}

export class Progress {
  private done = 0;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private readonly started: number;
  private readonly stream: NonNullable<ProgressOptions['stream']>;
  private readonly tty: boolean;
  private readonly intervalMs: number;
  private readonly now: () => number;
  private finished = false;

  constructor(
    readonly label: string,
    private readonly opts: ProgressOptions = {},
  ) {
    this.stream = opts.stream ?? process.stderr;
    this.tty = opts.tty ?? this.stream.isTTY === true;
    this.intervalMs = opts.intervalMs ?? (this.tty ? 100 : 5000);
    this.now = opts.now ?? Date.now;
    this.started = this.now();
  }

  /** Advances by `n` units and redraws if enough time has passed. */
  tick(n = 1): void {
    this.done += n;
    const t = this.now();
    if (t - this.lastDraw >= this.intervalMs) this.draw(t);
  }

  /** Draws the final state and ends the line. Safe to call twice. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.draw(this.now(), true);
  }

  /** The current line, without control characters (used by tests and by `draw`). */
  render(t = this.now()): string {
    const total = this.opts.total ?? 0;
    const secs = (t - this.started) / 1000;
    // No rate (and so no eta) until some time has passed: 0 elapsed would print absurd rates.
    const rate = secs > 0 ? this.done / secs : 0;
    const rateText = secs > 0 ? `${rate >= 100 ? Math.round(rate) : rate.toFixed(1)}/s` : '?/s';
    if (total <= 0) return `${this.label} ${this.done} ${rateText} ${secs.toFixed(1)}s`;
    const frac = Math.min(this.done / total, 1);
    const eta = rate > 0 ? (total - this.done) / rate : Number.POSITIVE_INFINITY;
    const etaText = Number.isFinite(eta) ? `eta ${eta.toFixed(0)}s` : 'eta ?';
    const width = 24;
    const filled = Math.round(frac * width);
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
    return `${this.label} ${bar} ${(frac * 100).toFixed(1)}% ${this.done}/${total} ${rateText} ${etaText}`;
  }

  private draw(t: number, final = false): void {
    this.lastDraw = t;
    const line = this.render(t);
    if (this.tty) {
      const cols = this.stream.columns ?? 100;
      this.stream.write(
        `\r${line.slice(0, Math.max(cols - 1, 20)).padEnd(Math.min(cols - 1, 100))}${final ? '\n' : ''}`,
      );
    } else {
      this.stream.write(`${line}\n`);
    }
  }
}
