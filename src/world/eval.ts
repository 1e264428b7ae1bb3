/**
 * Evaluation of a policy on a world's questions, on both paths. The rollout loop is the
 * environment of DESIGN.md section 1 in its simplest batched form: generate until `</search>`,
 * `</answer>`, `<eos>` or the context; after a search, retrieve the top-k passages, insert the
 * `<information>` block and continue; at most 6 searches. Scoring is the RL reward
 * (src/rl/reward.ts: Search-R1 EM with the format requirement).
 *
 * Metrics per group (hop x oracle label) and path: EM, TC (searches per question) and
 * TP = sum(EM) / sum(TC). Boundary metrics on the with-tool path: the search rate on questions the
 * policy knows and the no-search rate on questions it does not, where "knows" is read two ways:
 * the oracle label (facts in the pretraining mix) and the policy's own no-tool answer being right.
 */
import type { GenerateRequest, GenerateResult } from '../gpu/decoder.js';
import { scoreTrajectory } from '../rl/reward.js';
import type { TextSegment } from '../rl/types.js';
import { deriveSeed } from '../util/rng.js';
import { informationBlock, MAX_SEARCHES, type PromptPath, promptIds } from './prompts.js';
import type { WorldQuestion } from './questions.js';
import { observationText, type Retriever } from './retrieval.js';
import type { WorldTokenizer } from './tokenizer.js';

export interface EvalOptions {
  temperature: number;
  seed: number;
  /** Rollouts per question and path. */
  samples: number;
  topK: number;
  /** The policy's context (n_positions): a rollout that would outgrow it ends with 'length'. */
  context: number;
  /** Requests per decode batch. */
  batch: number;
}

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

type Generate = (reqs: GenerateRequest[]) => Promise<GenerateResult[]>;

interface Live {
  q: WorldQuestion;
  path: PromptPath;
  sample: number;
  ids: number[];
  segments: TextSegment[];
  toolCalls: number;
  turn: number;
  stop?: string;
}

/** Rolls out every question on both paths, `samples` times each. Deterministic for a seed. */
export async function rollout(
  generate: Generate,
  tok: WorldTokenizer,
  retriever: Retriever,
  questions: readonly WorldQuestion[],
  opts: EvalOptions,
  onTurn?: (done: number, total: number) => void,
): Promise<EvalRollout[]> {
  const live: Live[] = [];
  for (const q of questions) {
    for (const path of ['no-tool', 'with-tool'] as const) {
      for (let sample = 0; sample < opts.samples; sample++) {
        live.push({
          q,
          path,
          sample,
          ids: promptIds(tok, path, q.question),
          segments: [],
          toolCalls: 0,
          turn: 0,
        });
      }
    }
  }
  const stopTokens = [tok.tag['</search>'], tok.tag['</answer>'], tok.eos];
  for (;;) {
    const active = live.filter((r) => r.stop === undefined);
    if (active.length === 0) break;
    for (let a = 0; a < active.length; a += opts.batch) {
      const rows = active.slice(a, a + opts.batch);
      const reqs = rows.map((r) => ({
        prompt: r.ids,
        maxNewTokens: Math.max(1, opts.context - r.ids.length),
        seed: deriveSeed(opts.seed, 'eval', r.q.id, r.path, r.sample, r.turn),
        temperature: opts.temperature,
        stopTokens,
      }));
      const results = await generate(reqs);
      rows.forEach((r, i) => {
        step(r, results[i], tok, retriever, opts);
      });
    }
    onTurn?.(live.filter((r) => r.stop !== undefined).length, live.length);
  }
  return live.map((r) => {
    const score = scoreTrajectory(r.segments, r.path, r.q.golden_answers, { maxToolCalls: MAX_SEARCHES });
    return {
      questionId: r.q.id,
      path: r.path,
      sample: r.sample,
      text: r.segments.map((s) => s.text).join(''),
      answer: score.answer,
      em: score.reward,
      formatOk: score.formatOk,
      toolCalls: r.toolCalls,
      stopReason: r.stop!,
    };
  });
}

/** Applies one generate result to a rollout: finish it, or run its search and insert the observation. */
function step(
  r: Live,
  res: GenerateResult,
  tok: WorldTokenizer,
  retriever: Retriever,
  opts: EvalOptions,
): void {
  r.turn++;
  r.ids.push(...res.tokens);
  const text = tok.decode(res.tokens);
  if (text !== '') r.segments.push({ kind: 'generated', text: r.segments.length > 0 ? ` ${text}` : text });
  r.stop = finishReason(r, res.tokens[res.tokens.length - 1], tok);
  if (r.stop !== undefined) return;
  const open = text.lastIndexOf('<search>');
  const query = text.slice(open < 0 ? 0 : open + '<search>'.length, text.length - '</search>'.length).trim();
  const observation = informationBlock(observationText(retriever.search(query, opts.topK)));
  const obsIds = tok.encode(observation);
  r.toolCalls++;
  if (r.ids.length + obsIds.length >= opts.context) {
    r.stop = 'length';
    return;
  }
  r.ids.push(...obsIds);
  r.segments.push({ kind: 'observation', text: ` ${observation}` });
}

/** Why a rollout ends after this turn; undefined when it made a search the environment must answer. */
function finishReason(r: Live, last: number, tok: WorldTokenizer): string | undefined {
  if (last === tok.tag['</answer>']) return 'answer';
  if (last === tok.eos) return 'eos';
  if (last !== tok.tag['</search>']) return 'length';
  if (r.path === 'no-tool') return 'invalid-action';
  if (r.toolCalls >= MAX_SEARCHES) return 'tool-limit';
  return undefined;
}

// ---- metrics --------------------------------------------------------------------------------

export interface PathMetrics {
  n: number;
  em: number;
  tc: number;
  /** sum(EM) / sum(TC); null when no search was made. */
  tp: number | null;
  formatOk: number;
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

function pathMetrics(rs: readonly EvalRollout[]): PathMetrics {
  const n = rs.length;
  const sumEm = rs.reduce((a, r) => a + r.em, 0);
  const sumTc = rs.reduce((a, r) => a + r.toolCalls, 0);
  return {
    n,
    em: n ? sumEm / n : 0,
    tc: n ? sumTc / n : 0,
    tp: sumTc > 0 ? sumEm / sumTc : null,
    formatOk: n ? rs.filter((r) => r.formatOk).length / n : 0,
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
    const searched = r.toolCalls > 0;
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
    `${'group'.padEnd(18)} ${'n'.padStart(4)}  ${'no-tool EM'.padStart(10)}  ${'with-tool EM'.padStart(12)} ${'TC'.padStart(6)} ${'TP'.padStart(6)}  format`,
  ];
  for (const g of report.groups) {
    lines.push(
      `${g.group.padEnd(18)} ${String(g.questions).padStart(4)}  ${f(g.noTool.em).padStart(10)}  ${f(g.withTool.em).padStart(12)} ${f(g.withTool.tc).padStart(6)} ${f(g.withTool.tp).padStart(6)}  ${f(g.withTool.formatOk)}/${f(g.noTool.formatOk)}`,
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
