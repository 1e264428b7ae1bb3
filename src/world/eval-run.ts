/**
 * `akbe eval` behind the CLI: loads a checkpoint and a world, rolls out the split's questions on
 * both paths (eval.ts) with the world's lexical search over the full corpus, and returns the
 * printed report (and writes the JSON, when asked). The same seed gives the same report.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DeviceChoice } from '../gpu/session.js';
import { loadCorpus } from '../index/corpus.js';
import { Progress } from '../util/progress.js';
import type { Split } from './entities.js';
import { evalReport, formatReport, rollout } from './eval.js';
import { readQuestions, readWorldSummary, readWorldTokenizer } from './files.js';
import { LexicalRetriever } from './retrieval.js';

export interface EvalRunOptions {
  checkpoint: string;
  worldDir: string;
  split: Split;
  temperature: number;
  seed: number;
  samples: number;
  limit?: number;
  batch: number;
  device?: DeviceChoice;
  threads?: number;
  json?: string;
  err: NodeJS.WritableStream;
}

export async function runEval(o: EvalRunOptions): Promise<string> {
  const summary = await readWorldSummary(o.worldDir);
  const tok = await readWorldTokenizer(o.worldDir);
  const questions = (await readQuestions(o.worldDir, o.split)).slice(0, o.limit);
  const corpus = await loadCorpus(join(o.worldDir, 'corpus.jsonl'));
  const retriever = new LexicalRetriever(corpus, corpus);
  const { PolicyRuntime } = await import('../gpu/policy-runtime.js');
  const runtime = await PolicyRuntime.fromCheckpoint(o.checkpoint, {
    device: o.device ?? 'cpu',
    intraOpThreads: o.threads,
  });
  if (runtime.config.vocab_size !== tok.size) {
    await runtime.close();
    throw new Error(
      `--checkpoint ${o.checkpoint}: vocab_size ${runtime.config.vocab_size} differs from the world's tokenizer (${tok.size}); evaluate it on the world it was trained on`,
    );
  }
  const started = Date.now();
  const progress = new Progress('eval rollouts', { total: questions.length * 2 * o.samples, stream: o.err });
  let shown = 0;
  try {
    const rollouts = await rollout(
      (reqs) => runtime.generateBatch(reqs),
      tok,
      retriever,
      questions,
      {
        temperature: o.temperature,
        seed: o.seed,
        samples: o.samples,
        topK: summary.config.mix.topK,
        context: runtime.config.n_positions,
        batch: o.batch,
      },
      (done) => {
        progress.tick(done - shown);
        shown = done;
      },
    );
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
