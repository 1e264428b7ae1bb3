/**
 * Evaluation of a run's policy version on a world split, through the run's policy and search
 * services (so it works the same in one process and on a cluster) and through the rollout machine
 * with the run's limits (src/actors/rollout/eval-rollouts.ts): greedy by default, or k samples at a
 * temperature; the report of src/world/eval.ts (per group, boundary figures, pass@k) and a
 * before/after table.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { RolloutLimits } from '../../machines/rollout.js';
import type { TextEnvironment } from '../../text/environment.js';
import type { AnyTool } from '../../tools/tool.js';
import type { Split } from '../../world/entities.js';
import type { EvalReport } from '../../world/eval.js';
import { evalReport, evalRolloutOf } from '../../world/eval.js';
import { readQuestions } from '../../world/files.js';
import { evalRollouts } from './eval-rollouts.js';
import { remoteRolloutActors } from './rollout-worker.js';

export interface SplitScore {
  split: Split;
  questions: number;
  /** With-tool path: EM, mean tool calls per question, EM / tool calls. */
  em: number;
  tc: number;
  tp: number | null;
  noToolEm: number;
}

export interface EvaluateOptions {
  nc: NatsConnection;
  runId: string;
  version: number;
  worldDir: string;
  split: Split;
  /** First N questions of the split (all when undefined). */
  limit?: number;
  topK: number;
  context: number;
  /** The run's text environment and tools (what its rollout workers use). */
  env: TextEnvironment;
  tools: readonly AnyTool[];
  /** The run's rollout limits (maxToolCalls, maxResponseTokens, toolTags). */
  limits: RolloutLimits;
  /** Default 0 (greedy). */
  temperature?: number;
  /** Samples per question and path (default 1). */
  samples?: number;
  seed?: number;
}

export async function evaluateSplit(o: EvaluateOptions): Promise<{ score: SplitScore; report: EvalReport }> {
  const questions = (await readQuestions(o.worldDir, o.split)).slice(0, o.limit);
  const results = await evalRollouts(
    questions.map((q) => ({
      id: q.id,
      gold: q.golden_answers,
      withToolPrompt: o.env.promptIds('with-tool', q.question),
      noToolPrompt: o.env.promptIds('no-tool', q.question),
    })),
    {
      actors: remoteRolloutActors(o.nc, o.runId, o.env, o.topK, o.tools),
      limits: o.limits,
      context: o.context,
      temperature: o.temperature ?? 0,
      samples: o.samples ?? 1,
      seed: o.seed ?? 0,
      policyVersion: o.version,
    },
  );
  const report = evalReport(results.map(evalRolloutOf), questions);
  const all = report.groups.find((g) => g.group === 'all')!;
  return {
    report,
    score: {
      split: o.split,
      questions: questions.length,
      em: all.withTool.em,
      tc: all.withTool.tc,
      tp: all.withTool.tp,
      noToolEm: all.noTool.em,
    },
  };
}

/** The before/after table: one row per split, EM, TC and TP of the with-tool path (and no-tool EM). */
export function formatBeforeAfter(before: SplitScore[], after: SplitScore[]): string {
  const f = (x: number | null, d = 3) => (x === null ? '-' : x.toFixed(d));
  const lines = [
    `${'split'.padEnd(6)} ${'n'.padStart(4)}  ${'EM before'.padStart(9)} ${'EM after'.padStart(9)}  ${'TC before'.padStart(9)} ${'TC after'.padStart(9)}  ${'TP before'.padStart(9)} ${'TP after'.padStart(9)}  ${'no-tool EM'.padStart(14)}`,
  ];
  for (const b of before) {
    const a = after.find((x) => x.split === b.split);
    if (!a) continue;
    lines.push(
      `${b.split.padEnd(6)} ${String(b.questions).padStart(4)}  ${f(b.em).padStart(9)} ${f(a.em).padStart(9)}  ${f(b.tc, 2).padStart(9)} ${f(a.tc, 2).padStart(9)}  ${f(b.tp).padStart(9)} ${f(a.tp).padStart(9)}  ${`${f(b.noToolEm)}->${f(a.noToolEm)}`.padStart(14)}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
