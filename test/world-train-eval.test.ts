import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { evalRollouts, localRolloutActors } from '../src/actors/rollout/eval-rollouts.js';
import type { GenerateRequest, GenerateResult } from '../src/gpu/decoder.js';
import { runEval } from '../src/jobs/eval-run.js';
import { runPretrain } from '../src/jobs/pretrain-run.js';
import { worldEnvironment } from '../src/text/environment.js';
import { searchTool } from '../src/tools/search.js';
import type { ServiceCall } from '../src/tools/tool.js';
import { TINY_WORLD } from '../src/world/config.js';
import { type EvalRollout, evalReport, evalRolloutOf } from '../src/world/eval.js';
import { writeWorld } from '../src/world/files.js';
import { generateWorld } from '../src/world/generate.js';
import { assembleBatch, batchSchedule, DEFAULT_PRETRAIN, lrAt } from '../src/world/pretrain.js';
import { LexicalRetriever } from '../src/world/retrieval.js';

const world = generateWorld({ ...TINY_WORLD, seed: 9 });
const tok = world.tokenizer;
const dev = world.questions.filter((q) => q.split === 'dev');

t.test('lr: linear warmup to the peak, cosine down to the floor at the last step', async (t) => {
  const cfg = { lr: 1e-3, warmup: 10, steps: 110, minLrRatio: 0.1 };
  t.equal(lrAt(5, cfg), 5e-4);
  t.equal(lrAt(10, cfg), 1e-3);
  t.ok(Math.abs(lrAt(60, cfg) - 5.5e-4) < 1e-12, 'half-way is the mid-point');
  t.ok(Math.abs(lrAt(110, cfg) - 1e-4) < 1e-12);
  for (let s = 11; s < 110; s++) t.ok(lrAt(s + 1, cfg) <= lrAt(s, cfg));
});

t.test(
  'the batch schedule is a function of the seed, covers each sequence once per epoch, and buckets lengths',
  async (t) => {
    const cfg = { ...DEFAULT_PRETRAIN, steps: 50, batch: 16 };
    const a = batchSchedule(world.mix, cfg);
    t.same(batchSchedule(world.mix, cfg), a, 'deterministic');
    t.notSame(batchSchedule(world.mix, { ...cfg, seed: 1 }), a);
    const perEpoch = Math.floor(world.mix.kinds.length / (cfg.batch * 32)) * 32;
    const firstEpoch = a.slice(0, perEpoch).flatMap((b) => b.sequences);
    t.equal(new Set(firstEpoch).size, firstEpoch.length, 'no sequence twice in an epoch');
    for (const b of a) {
      const longest = Math.max(...b.sequences.map((s) => world.mix.offsets[s + 1] - world.mix.offsets[s]));
      t.ok(b.seq >= longest && cfg.buckets.includes(b.seq));
      t.ok(
        cfg.buckets.filter((x) => x < b.seq).every((x) => x < longest),
        'the smallest bucket that fits',
      );
    }
    const batch = assembleBatch(world.mix, a[0], tok.pad);
    const T = a[0].seq;
    const s0 = a[0].sequences[0];
    const off = world.mix.offsets[s0];
    const len = world.mix.offsets[s0 + 1] - off;
    for (let i = 0; i + 1 < len; i++)
      t.equal(batch.lossMask[i], world.mix.mask[off + i + 1], 'position i scores token i+1');
    for (let i = len - 1; i < T - 1; i++) t.equal(batch.lossMask[i], 0, 'padding is not a target');
    t.equal(batch.inputIds[len], BigInt(tok.pad));
  },
);

/** A scripted policy: searches once with the question's own query, then answers `answer(q)`. */
function scripted(
  answer: (qid: string) => string,
  opts: { searchNoTool?: boolean; searchForever?: boolean } = {},
) {
  const byPrompt = new Map(world.questions.map((q) => [q.question, q]));
  return async (reqs: GenerateRequest[]): Promise<GenerateResult[]> =>
    reqs.map((r) => {
      const text = tok.decode(r.prompt);
      const q = [...byPrompt.entries()].find(([question]) => text.includes(question))![1];
      const noTool = text.includes('Answer from memory.');
      const searched = text.includes('<information>');
      const f = world.index.factById.get(q.facts[0])!;
      const query = `${world.index.name(f.subject)} ${f.relation === 'born_in' ? 'born' : 'facts'}`;
      let out: string;
      if ((!noTool || opts.searchNoTool) && (!searched || opts.searchForever))
        out = `<think> I am not sure. </think> <search> ${query} </search>`;
      else out = `<answer> ${answer(q.id)} </answer>`;
      const tokens = tok.encode(out);
      return {
        tokens,
        logprobs: tokens.map(() => 0),
        policyLogprobs: tokens.map(() => 0),
        finishReason: 'stop_token',
      };
    });
}

const retriever = new LexicalRetriever(world.passages, world.passages);
const search: ServiceCall = async (_service, body) => {
  const { queries, topk } = body as { queries: string[]; topk: number };
  return {
    results: queries.map((q) =>
      retriever.search(q, topk).map((p) => ({ id: p.id, title: '', contents: p.contents, score: 0 })),
    ),
  };
};

/** Evaluation rollouts through the rollout machine with a scripted policy (what akbe eval runs). */
async function rollout(
  generate: (reqs: GenerateRequest[]) => Promise<GenerateResult[]>,
  questions: typeof dev,
): Promise<EvalRollout[]> {
  const env = worldEnvironment(tok);
  const results = await evalRollouts(
    questions.map((q) => ({
      id: q.id,
      gold: q.golden_answers,
      withToolPrompt: env.promptIds('with-tool', q.question),
      noToolPrompt: env.promptIds('no-tool', q.question),
    })),
    {
      actors: localRolloutActors(
        env,
        async (req) => (await generate([req]))[0],
        [searchTool({ topK: 3 })],
        search,
      ),
      limits: { toolTags: ['search'], maxToolCalls: 6, maxResponseTokens: 1000 },
      context: 1000,
      temperature: 1,
      samples: 1,
      seed: 0,
      policyVersion: 0,
    },
  );
  return results.map(evalRolloutOf);
}
const gold = (qid: string) => world.questions.find((q) => q.id === qid)!.golden_answers[0];

t.test('the rollout loop inserts observations, counts searches and scores with the RL reward', async (t) => {
  const rs = await rollout(scripted(gold), dev);
  t.equal(rs.length, dev.length * 2);
  const wt = rs.filter((r) => r.path === 'with-tool');
  t.ok(wt.every((r) => r.toolCalls === 1 && r.em === 1 && r.stopReason === 'answer'));
  t.ok(
    wt.every((r) =>
      /<search> .+ <\/search> <information> Doc 1\(Title: .+<\/information> <answer>/.test(r.text),
    ),
  );
  const report = evalReport(rs, dev);
  const all = report.groups.find((g) => g.group === 'all')!;
  t.same([all.withTool.em, all.withTool.tc, all.withTool.tp, all.noTool.em, all.noTool.tc], [1, 1, 1, 1, 0]);
  t.equal(report.boundary.all.searchRateKnown, 1);
  t.equal(report.boundary.all.noSearchRateUnknown, 0);
});

t.test('boundary metrics: answering known questions from memory and searching unknown ones', async (t) => {
  // No-tool answers right only when known; with-tool rollouts are hand-made: search iff unknown.
  const rs: EvalRollout[] = dev.flatMap((q) => [
    {
      questionId: q.id,
      path: 'no-tool',
      sample: 0,
      text: '',
      answer: '',
      em: q.known ? 1 : 0,
      formatOk: true,
      toolCalls: 0,
      stopReason: 'answer',
    },
    {
      questionId: q.id,
      path: 'with-tool',
      sample: 0,
      text: '',
      answer: '',
      em: 1,
      formatOk: true,
      toolCalls: q.known ? 0 : 2,
      stopReason: 'answer',
    },
  ]);
  const r = evalReport(rs, dev);
  t.same(r.boundary.all, {
    searchRateKnown: 0,
    searchRatePolicyKnown: 0,
    noSearchRateUnknown: 0,
    noSearchRatePolicyUnknown: 0,
  });
  const all = r.groups.find((g) => g.group === 'all')!;
  const unknown = dev.filter((q) => !q.known).length;
  t.equal(all.withTool.tp, dev.length / (2 * unknown), 'TP = sum EM / sum TC');
});

t.test('a search on the no-tool path and a seventh search end the rollout without credit', async (t) => {
  const nt = await rollout(scripted(gold, { searchNoTool: true }), dev.slice(0, 3));
  t.ok(nt.filter((r) => r.path === 'no-tool').every((r) => r.stopReason === 'invalid-action' && r.em === 0));
  const loop = await rollout(scripted(gold, { searchForever: true }), dev.slice(0, 2));
  const wt = loop.filter((r) => r.path === 'with-tool');
  t.ok(wt.every((r) => r.toolCalls === 6 && r.stopReason === 'tool-limit' && r.em === 0 && !r.formatOk));
});

t.test(
  'pretrain resumes from its checkpoint, and eval with the same seed prints the same report',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'akbe-pretrain-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const worldDir = join(dir, 'world');
    const out = join(dir, 'ckpt');
    await writeWorld(world, worldDir);
    const err = new PassThrough();
    err.resume();
    const base = { worldDir, outDir: out, checkpointEvery: 2, logEvery: 2, threads: 1, err };
    const config = {
      ...DEFAULT_PRETRAIN,
      steps: 3,
      batch: 8,
      nEmbd: 16,
      nHead: 2,
      nLayer: 1,
      buckets: [64, 128],
    };
    const first = await runPretrain({ ...base, config, resume: false });
    t.equal(first.step, 3);
    await t.rejects(runPretrain({ ...base, config, resume: false }), {
      name: 'PretrainStateError',
      message: /--resume/,
    });
    const second = await runPretrain({ ...base, config: { ...config, steps: 4 }, resume: true });
    t.equal(second.step, 4);
    const state = JSON.parse(readFileSync(join(out, 'pretrain.json'), 'utf8'));
    t.equal(state.step, 4);
    t.same(JSON.parse(readFileSync(join(out, 'tokenizer.json'), 'utf8')), tok.toHuggingFace());
    const opts = {
      checkpoint: out,
      worldDir,
      split: 'dev' as const,
      temperature: 1,
      seed: 5,
      samples: 1,
      limit: 6,
      batch: 16,
      threads: 1,
      err,
    };
    const a = await runEval(opts);
    t.equal(await runEval(opts), a, 'same seed, same report');
    t.match(a, /no-tool EM/);
    t.match(a, /boundary \(single\): search rate on known/);
  },
);
