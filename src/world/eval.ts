/**
 * The evaluation report of a policy on a world's questions, both paths. The rollouts come from the
 * rollout machine, the environment training rolls out in (src/actors/rollout/eval-rollouts.ts: same
 * grammar, tool-call limit, response budget and reward), here read per group (hop x oracle label)
 * and path: EM, TC (searches per question, counted as training counts them: src/rl/metrics.ts
 * countedToolCalls), TP = sum(EM) / sum(TC), pass@k over samples. Boundary metrics on the
 * with-tool path: the search rate on questions the policy knows and the no-search rate on
 * questions it does not, where "knows" is read two ways: the oracle label (facts in the
 * pretraining mix) and the policy's own no-tool answer being right.
 */
import { answerMetrics, countedToolCalls } from '../rl/metrics.js';
import type { RolloutResult } from '../rl/types.js';
import type { PromptPath } from '../text/prompts.js';
import type { WorldQuestion } from './questions.js';

export interface EvalRollout {
  questionId: string;
  path: PromptPath;
  sample: number;
  text: string;
  answer: string | null;
  em: number;
  formatOk: boolean;
  toolCalls: number;
  stopReason: string;
}

/** A rollout machine's result (src/actors/rollout/eval-rollouts.ts) as the report reads it. */
export function evalRolloutOf(r: RolloutResult): EvalRollout {
  return {
    questionId: r.questionId,
    path: r.path,
    sample: r.index,
    text: r.segments.map((s) => s.text).join(''),
    answer: r.answer,
    em: r.em,
    formatOk: r.formatOk,
    toolCalls: r.toolCalls,
    stopReason: r.stopReason,
  };
}

// ---- metrics --------------------------------------------------------------------------------

export interface PathMetrics {
  n: number;
  em: number;
  tc: number;
  /** sum(EM) / sum(TC); null when no search was made. */
  tp: number | null;
  formatOk: number;
  /** Share of questions with at least one correct sample (= EM with one sample). */
  passAtK: number;
}

export interface BoundaryMetrics {
  /** With-tool search rate on questions the oracle says are known / the no-tool path got right. */
  searchRateKnown: number | null;
  searchRatePolicyKnown: number | null;
  /** With-tool no-search rate on oracle-unknown / no-tool-wrong questions. */
  noSearchRateUnknown: number | null;
  noSearchRatePolicyUnknown: number | null;
}

export interface EvalReport {
  groups: Array<{ group: string; questions: number; noTool: PathMetrics; withTool: PathMetrics }>;
  boundary: Record<'single' | 'all', BoundaryMetrics>;
}

/**
 * EM, TC and TP as training and the audit count them (src/rl/metrics.ts), means over every
 * sample; the format rate; pass@k = the share of questions with at least one correct sample.
 */
function pathMetrics(rs: readonly EvalRollout[]): PathMetrics {
  const n = rs.length;
  const solved = new Map<string, boolean>();
  for (const r of rs) solved.set(r.questionId, (solved.get(r.questionId) ?? false) || r.em > 0);
  return {
    ...answerMetrics(rs.map((r) => ({ correct: r.em, toolCalls: r.toolCalls, stopReason: r.stopReason }))),
    formatOk: n ? rs.filter((r) => r.formatOk).length / n : 0,
    passAtK: solved.size ? [...solved.values()].filter(Boolean).length / solved.size : 0,
  };
}

const rate = (num: number, den: number) => (den > 0 ? num / den : null);

function boundary(rs: readonly EvalRollout[], byId: Map<string, WorldQuestion>): BoundaryMetrics {
  const noTool = new Map<string, EvalRollout>();
  for (const r of rs) if (r.path === 'no-tool') noTool.set(`${r.questionId}|${r.sample}`, r);
  let known = 0;
  let knownSearched = 0;
  let unknown = 0;
  let unknownSkipped = 0;
  let pKnown = 0;
  let pKnownSearched = 0;
  let pUnknown = 0;
  let pUnknownSkipped = 0;
  for (const r of rs) {
    if (r.path !== 'with-tool') continue;
    const searched = countedToolCalls(r) > 0;
    if (byId.get(r.questionId)!.known) {
      known++;
      if (searched) knownSearched++;
    } else {
      unknown++;
      if (!searched) unknownSkipped++;
    }
    const nt = noTool.get(`${r.questionId}|${r.sample}`);
    if (nt && nt.em > 0) {
      pKnown++;
      if (searched) pKnownSearched++;
    } else {
      pUnknown++;
      if (!searched) pUnknownSkipped++;
    }
  }
  return {
    searchRateKnown: rate(knownSearched, known),
    searchRatePolicyKnown: rate(pKnownSearched, pKnown),
    noSearchRateUnknown: rate(unknownSkipped, unknown),
    noSearchRatePolicyUnknown: rate(pUnknownSkipped, pUnknown),
  };
}

export function evalReport(
  rollouts: readonly EvalRollout[],
  questions: readonly WorldQuestion[],
): EvalReport {
  const byId = new Map(questions.map((q) => [q.id, q]));
  const groupOf = (q: WorldQuestion) => `${q.hop}/${q.known ? 'known' : 'unknown'}`;
  const names = [...new Set(questions.map(groupOf))].sort();
  const groups = [...names, 'all'].map((group) => {
    const inGroup = (r: EvalRollout) => group === 'all' || groupOf(byId.get(r.questionId)!) === group;
    const rs = rollouts.filter(inGroup);
    return {
      group,
      questions: group === 'all' ? questions.length : questions.filter((q) => groupOf(q) === group).length,
      noTool: pathMetrics(rs.filter((r) => r.path === 'no-tool')),
      withTool: pathMetrics(rs.filter((r) => r.path === 'with-tool')),
    };
  });
  const single = rollouts.filter((r) => byId.get(r.questionId)!.hop === 'single');
  return { groups, boundary: { single: boundary(single, byId), all: boundary(rollouts, byId) } };
}

export function formatReport(report: EvalReport, header: string): string {
  const f = (x: number | null) => (x === null ? '   -' : x.toFixed(3));
  const lines = [
    header,
    `${'group'.padEnd(18)} ${'n'.padStart(4)}  ${'no-tool EM'.padStart(10)}  ${'with-tool EM'.padStart(12)} ${'TC'.padStart(6)} ${'TP'.padStart(6)}  format       ${'pass@k wt/nt'.padStart(12)}`,
  ];
  for (const g of report.groups) {
    lines.push(
      `${g.group.padEnd(18)} ${String(g.questions).padStart(4)}  ${f(g.noTool.em).padStart(10)}  ${f(g.withTool.em).padStart(12)} ${f(g.withTool.tc).padStart(6)} ${f(g.withTool.tp).padStart(6)}  ${f(g.withTool.formatOk)}/${f(g.noTool.formatOk)}  ${`${f(g.withTool.passAtK)}/${f(g.noTool.passAtK)}`.padStart(12)}`,
    );
  }
  for (const [name, b] of Object.entries(report.boundary)) {
    lines.push(
      `boundary (${name}): search rate on known ${f(b.searchRateKnown)} (oracle) ${f(b.searchRatePolicyKnown)} (no-tool correct); ` +
        `no-search rate on unknown ${f(b.noSearchRateUnknown)} (oracle) ${f(b.noSearchRatePolicyUnknown)} (no-tool wrong)`,
    );
  }
  return `${lines.join('\n')}\n`;
}
