/**
 * The oracle rates of each learner step (src/rl/metrics.ts `oracleSearchRates`), for
 * learner.step's `extra`. The learner does not know the world's oracle; the orchestrator, which
 * loaded the world's questions, does: this follows the step's group.completed facts (less any the
 * learner discarded) and forms the rates when the step's learner.step is mapped to its event.
 * `akbe replay` recomputes the same rates from the log (src/audit/audit.ts).
 */
import type { AkbeFact } from '../../machines/facts.js';
import type { QuestionSpec } from '../../machines/question.js';
import {
  DEFAULT_TOOL_CALL_COUNT,
  oracleRatesExtra,
  oracleSearchRates,
  type ToolCallCount,
} from '../../rl/metrics.js';
import type { QuestionGroup } from '../../rl/types.js';

export class OracleRates {
  private readonly known = new Map<string, boolean>();
  /** Per step, the groups the learner received, by question. */
  private readonly groups = new Map<number, Map<string, QuestionGroup>>();

  constructor(
    questions: readonly QuestionSpec[],
    /** How the learner counts tool calls (its TC), so that "searched" means the same here. */
    private readonly count: ToolCallCount = DEFAULT_TOOL_CALL_COUNT,
  ) {
    for (const q of questions) if (q.known !== undefined) this.known.set(q.id, q.known);
  }

  /** True when the questions carry an oracle at all (else no rates are recorded). */
  get hasOracle(): boolean {
    return this.known.size > 0;
  }

  see(fact: AkbeFact): void {
    if (!this.hasOracle) return;
    if (fact.type === 'group.completed') {
      const g = fact.group;
      const step = this.groups.get(g.step) ?? new Map<string, QuestionGroup>();
      step.set(g.questionId, g);
      this.groups.set(g.step, step);
    } else if (fact.type === 'group.discarded') {
      // A group of another version never reaches the learner's metrics: leave it out here too.
      for (const step of this.groups.values()) {
        const g = step.get(fact.questionId);
        if (g && g.policyVersion === fact.policyVersion) step.delete(fact.questionId);
      }
    }
  }

  /** learner.step's oracle keys for `step` (empty when there is no oracle or nothing to count). */
  extra(step: number): Record<string, number> {
    const groups = [...(this.groups.get(step)?.values() ?? [])];
    return oracleRatesExtra(oracleSearchRates(groups, (id) => this.known.get(id), this.count));
  }

  forget(step: number): void {
    this.groups.delete(step);
  }
}
