/**
 * Per-step timing the learner's facts do not carry: when a step started, when its last rollout
 * came back (or training began, whichever is first), and what the trainer reported. learner.step
 * and the step line read it; a step is forgotten once its learner.step is written.
 */

import type { StepTiming } from '../log/fact-events.js';

export type { StepTiming };

export class StepTimer {
  private readonly started = new Map<number, number>();
  private readonly rolledOut = new Map<number, number>();
  private readonly done = new Map<number, number>();
  private readonly trained = new Map<number, { seconds: number; tokensPerSecond: number }>();

  /** `rolloutsPerStep`: B x (G_wt + G_nt); `now` in milliseconds (injected for tests). */
  constructor(
    readonly rolloutsPerStep: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  stepStarted(step: number): void {
    this.started.set(step, this.now());
  }

  /** Counts a finished rollout; returns how many of the step's are done. */
  rolloutDone(step: number): number {
    const done = (this.done.get(step) ?? 0) + 1;
    this.done.set(step, done);
    if (done === this.rolloutsPerStep) this.rolledOut.set(step, this.now());
    return done;
  }

  /** Training began: the rollout phase ended here if not before (a resumed step's rollouts came from the log). */
  trainStarted(step: number): void {
    if (!this.rolledOut.has(step)) this.rolledOut.set(step, this.now());
  }

  trainDone(step: number, seconds: number, tokensPerSecond: number): void {
    this.trained.set(step, { seconds, tokensPerSecond });
  }

  timing(step: number): StepTiming | undefined {
    const t0 = this.started.get(step);
    const t1 = this.rolledOut.get(step);
    const tr = this.trained.get(step);
    if (t0 === undefined || t1 === undefined || !tr) return undefined;
    return {
      rolloutSeconds: (t1 - t0) / 1000,
      trainSeconds: tr.seconds,
      tokensPerSecond: tr.tokensPerSecond,
    };
  }

  forget(step: number): void {
    for (const m of [this.started, this.rolledOut, this.done, this.trained]) m.delete(step);
  }
}
