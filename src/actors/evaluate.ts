/**
 * Evaluation of a run's policy version on a world split, through the policy service (so it works
 * the same in one process and on a cluster): the world's evaluation loop (src/world/eval.ts) with
 * greedy decoding, its metrics EM, TC and TP on both paths, and a before/after table.
 */
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import type { GenerateRequest, GenerateResult } from '../gpu/decoder.js';
import type { Split } from '../world/entities.js';
import type { EvalReport } from '../world/eval.js';
import { requestGenerate } from './policy-service.js';

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
  seed?: number;
}

export async function evaluateSplit(o: EvaluateOptions): Promise<{ score: SplitScore; report: EvalReport }> {
  const { readQuestions, readWorldTokenizer } = await import('../world/files.js');
  const { evalReport, rollout } = await import('../world/eval.js');
  const { LexicalRetriever } = await import('../world/retrieval.js');
  const { loadCorpus } = await import('../index/corpus.js');
  const tok = await readWorldTokenizer(o.worldDir);
  const questions = (await readQuestions(o.worldDir, o.split)).slice(0, o.limit);
  const corpus = await loadCorpus(join(o.worldDir, 'corpus.jsonl'));
  const retriever = new LexicalRetriever(corpus, corpus);
  const generate = (reqs: GenerateRequest[]): Promise<GenerateResult[]> =>
    Promise.all(
      reqs.map(async (r) => {
        const g = await requestGenerate(o.nc, o.runId, {
          policyVersion: o.version,
          prompt: r.prompt,
          maxNewTokens: r.maxNewTokens,
          seed: r.seed,
          temperature: r.temperature ?? 0,
          topP: r.topP ?? 1,
          stopTokens: r.stopTokens ?? [],
        });
        return { tokens: g.tokens, logprobs: g.logprobs, policyLogprobs: g.logprobs, finishReason: g.finish };
      }),
    );
  const rollouts = await rollout(generate, tok, retriever, questions, {
    temperature: 0,
    seed: o.seed ?? 0,
    samples: 1,
    topK: o.topK,
    context: o.context,
    batch: 256,
  });
  const report = evalReport(rollouts, questions);
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
