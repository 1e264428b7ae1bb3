/**
 * One pass for the decode steps of several batches (issue 25 item 3: the policy versions in flight,
 * each batch on its own parameters): one run of n copies of the step graph (graph/compose.ts),
 * copy k fed batch k's step plan. Each batch gets what its own step returns, to the bit: the same
 * graph on the same shapes (test/gpu-mixed-versions.test.ts).
 *
 * On this 2-core CPU the pass costs what the separate steps cost (0.92-1.08x, BENCHMARKS.md): ORT's
 * per-run overhead is small next to its per-node work, which n copies still do. What it saves is
 * one run (and, on a GPU provider, one host-device synchronisation) per extra version per step.
 */
import type * as Ort from 'onnxruntime-node';
import { composeCopies, copyPrefix } from './graph/compose.js';
import { encodeModel, type ModelData } from './graph/onnx-proto.js';
import type { StepOutputs, StepPlan } from './row-batches.js';
import { type CreatedSession, createSession, type SessionConfig } from './session.js';

export class SharedStep {
  /** Sessions of n copies (n = 2 ..), created on first use. */
  private readonly sessions = new Map<number, Promise<CreatedSession>>();

  constructor(
    /** The step graph one batch runs. */
    private readonly model: ModelData,
    private readonly session: SessionConfig,
  ) {}

  private copies(n: number): Promise<CreatedSession> {
    let s = this.sessions.get(n);
    if (!s) {
      s = createSession(encodeModel(composeCopies(this.model, n)), this.session);
      this.sessions.set(n, s);
    }
    return s;
  }

  /** Runs the plans in one pass; returns each plan's logits (its `finish` of its copy's outputs). */
  async run(plans: readonly StepPlan[]): Promise<Float32Array[]> {
    const session = await this.copies(plans.length);
    const feeds: Record<string, Ort.Tensor> = {};
    plans.forEach((plan, k) => {
      for (const [name, t] of Object.entries(plan.feeds)) feeds[copyPrefix(k) + name] = t;
    });
    const out = await session.session.run(feeds);
    return plans.map((plan, k) => {
      const p = copyPrefix(k);
      const mine: StepOutputs = {};
      for (const [name, t] of Object.entries(out)) if (name.startsWith(p)) mine[name.slice(p.length)] = t;
      return plan.finish(mine);
    });
  }

  async release(): Promise<void> {
    for (const s of this.sessions.values()) await (await s).session.release();
    this.sessions.clear();
  }
}
