/**
 * `akbe eval` behind the CLI: loads a checkpoint and a world, rolls out the split's questions on
 * both paths through the rollout machine (src/actors/rollout/eval-rollouts.ts: training's grammar, limits
 * and reward) with the policy in this process and the world's lexical search over the full corpus
 * (brute force over the lexical embedding the training index serves: the same top-k), and returns
 * the printed report (and writes the JSON, when asked). The same seed gives the same report.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { coalescedGenerate, evalRollouts, localRolloutActors } from '../actors/rollout/eval-rollouts.js';
import { architecture } from '../gpu/architecture.js';
import type { WeightsDtype } from '../gpu/model-inputs.js';
import { PolicyRuntime } from '../gpu/policy-runtime.js';
import type { DeviceChoice } from '../gpu/session.js';
import { loadCorpus } from '../retrieval/corpus.js';
import { loadEnvironment, stopPieces } from '../text/environment.js';
import { MAX_SEARCHES } from '../text/prompts.js';
import { searchTool } from '../tools/search.js';
import type { ServiceCall } from '../tools/tool.js';
import { Progress } from '../util/progress.js';
import type { Split } from '../world/entities.js';
import { evalReport, evalRolloutOf, formatReport } from '../world/eval.js';
import { readQuestions, readWorldSummary, readWorldTokenizer } from '../world/files.js';
import { LexicalRetriever } from '../world/retrieval.js';

export interface EvalRunOptions {
  checkpoint: string;
  worldDir: string;
  split: Split;
  temperature: number;
  seed: number;
  samples: number;
  limit?: number;
  /** Searches a with-tool rollout may make (default 6, the world prompt's "Search up to 6 times"). */
  maxToolCalls?: number;
  /** Generated + observation tokens per rollout (default: what the context leaves after the prompt). */
  maxResponseTokens?: number;
  batch: number;
  device?: DeviceChoice;
  threads?: number;
  /** How the inference graphs take the weights (src/gpu/model-inputs.ts; default float32). */
  weights?: WeightsDtype;
  json?: string;
  err: NodeJS.WritableStream;
}

export async function runEval(o: EvalRunOptions): Promise<string> {
  const summary = await readWorldSummary(o.worldDir);
  const questions = (await readQuestions(o.worldDir, o.split)).slice(0, o.limit);
  const corpus = await loadCorpus(join(o.worldDir, 'corpus.jsonl'));
  const retriever = new LexicalRetriever(corpus, corpus);
  // The world's conventions for the world base, Search-R1's over the checkpoint's own tokenizer
  // for a Hugging Face policy: what `akbe train` rolls it out in (src/actors/roles/roles.ts).
  const env = await loadEnvironment(o.checkpoint, () => readWorldTokenizer(o.worldDir));
  const runtime = await PolicyRuntime.fromCheckpoint(o.checkpoint, {
    device: o.device ?? 'cpu',
    intraOpThreads: o.threads,
    vocabPieces: stopPieces(env),
    weights: o.weights,
  });
  const vocab = architecture(runtime.config).vocabSize;
  const tokens = env.codec.vocabSize;
  // A Hugging Face model's embedding may be padded past its tokenizer (Qwen3: 151,936 > 151,669).
  if (env.name === 'world' ? vocab !== tokens : vocab < tokens) {
    await runtime.close();
    throw new Error(
      env.name === 'world'
        ? `--checkpoint ${o.checkpoint}: vocab_size ${vocab} differs from the world's tokenizer (${tokens}); evaluate it on the world it was trained on`
        : `--checkpoint ${o.checkpoint}: vocab_size ${vocab} is smaller than its tokenizer's ${tokens} ids`,
    );
  }
  const started = Date.now();
  const progress = new Progress('eval rollouts', { total: questions.length * 2 * o.samples, stream: o.err });
  const topK = summary.config.mix.topK;
  const search: ServiceCall = async (_service, body) => {
    const { queries, topk } = body as { queries: string[]; topk: number };
    return {
      results: queries.map((q) =>
        retriever.search(q, topk).map((p) => ({ id: p.id, title: '', contents: p.contents, score: 0 })),
      ),
    };
  };
  const context = architecture(runtime.config).maxPositions;
  const generate = coalescedGenerate((reqs) => runtime.generateBatch(reqs), o.batch);
  try {
    const results = await evalRollouts(
      questions.map((q) => ({
        id: q.id,
        gold: q.golden_answers,
        withToolPrompt: env.promptIds('with-tool', q.question),
        noToolPrompt: env.promptIds('no-tool', q.question),
      })),
      {
        actors: localRolloutActors(env, generate, [searchTool({ topK })], search),
        limits: {
          toolTags: ['search'],
          maxToolCalls: o.maxToolCalls ?? MAX_SEARCHES,
          maxResponseTokens: o.maxResponseTokens ?? context,
        },
        context,
        temperature: o.temperature,
        samples: o.samples,
        seed: o.seed,
        policyVersion: 0,
        concurrency: o.batch,
        onDone: () => progress.tick(1),
      },
    );
    const rollouts = results.map(evalRolloutOf);
    progress.finish();
    const report = evalReport(rollouts, questions);
    const header =
      `eval ${o.checkpoint} on ${o.worldDir} split ${o.split}: ${questions.length} questions x ${o.samples} sample(s) per path, ` +
      `temperature ${o.temperature}, seed ${o.seed} (${((Date.now() - started) / 1000).toFixed(0)}s)`;
    if (o.json) await writeFile(o.json, `${JSON.stringify({ header, report, rollouts }, null, 1)}\n`);
    return formatReport(report, header.replace(/ \(\d+s\)$/, ''));
  } finally {
    await runtime.close();
  }
}
