/**
 * The replay audit: re-derives from a run's events alone what the rollout machines and the
 * learner computed — rewards (answer text + gold answers + format), boundary labels, targets with
 * their tie-break seeds and options, GRPO advantages, the trained batch's rows, and the per-step
 * metrics — and compares each with what was recorded. Every difference is a Mismatch naming the
 * event (its JetStream sequence), the field, and both values.
 *
 * Downstream computations use the RECOMPUTED values, so one tampered or wrong reward is reported
 * once, at its own event, and not again at every label and metric that depends on it.
 *
 * The learner's own pure function (`prepareStep` of src/machines/learner.ts) does the label,
 * advantage, batch and metric work, so the audit and the learner cannot drift apart.
 */
import type { AkbeEvent, BoundaryCategory } from '../events/catalog.js';
import { rolloutResultOf } from '../events/rollout-result.js';
import { prepareStep, selectionRuleOf } from '../machines/learner.js';
import { sampleStepQuestions } from '../machines/run.js';
import { getAlgorithm } from '../rl/algorithms/index.js';
import { oracleRatesExtra, oracleSearchRates } from '../rl/metrics.js';
import type { OfflineTarget } from '../rl/offline.js';
import type { QuestionGroup, RolloutResult } from '../rl/types.js';
import { checkCompleteness } from './completeness.js';
import { checkDpoPairs } from './dpo-pairs.js';
import { checkOfflineTargets } from './offline-targets.js';
import {
  type AuditSettings,
  groupOf,
  recomputeOutcome,
  responseFromTurns,
  settingsOf,
  stepVersion,
} from './recompute.js';
import { foldRunLog, type RunLog, type StepLog, seqOf } from './run-log.js';
import { auditStaleness, checkStepVersion } from './staleness.js';

export interface Mismatch {
  /** JetStream sequence of the event holding the recorded value (0: not stored / missing). */
  seq: number;
  eventType: string;
  step: number;
  questionId?: string;
  rolloutId?: string;
  field: string;
  recorded: unknown;
  recomputed: unknown;
}

export interface AuditReport {
  runId: string | null;
  mismatches: Mismatch[];
  /** Things the log does not hold, so they were not checked (never a failure by themselves). */
  notes: string[];
  /** Expected events that are missing or duplicated (completeness.ts): each fails the audit. */
  errors: string[];
  /** Why the log is incomplete (no run.finished), or null. */
  incomplete: string | null;
  checked: { rollouts: number; labels: number; steps: number; rows: number };
  settings: AuditSettings;
}

type Where = Omit<Mismatch, 'field' | 'recorded' | 'recomputed'>;

class Collector {
  readonly mismatches: Mismatch[] = [];
  readonly notes = new Set<string>();
  /** Compares with ===, or structurally for arrays and plain objects. */
  check(where: Where, field: string, recorded: unknown, recomputed: unknown): boolean {
    if (sameValue(recorded, recomputed)) return true;
    this.mismatches.push({ ...where, field, recorded, recomputed });
    return false;
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return Number.isNaN(a) && Number.isNaN(b);
  if (ArrayBuffer.isView(a)) a = Array.from(a as unknown as ArrayLike<number>);
  if (ArrayBuffer.isView(b)) b = Array.from(b as unknown as ArrayLike<number>);
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a).sort();
    const kb = Object.keys(b).sort();
    return (
      sameValue(ka, kb) &&
      ka.every((k) => sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
    );
  }
  return false;
}

/** Audits one run from its events (each carrying `meta.seq`, as `EventStore.replay` yields them). */
export function auditRun(events: Iterable<AkbeEvent>): AuditReport {
  const log = foldRunLog(events);
  return auditRunLog(log);
}

export function auditRunLog(log: RunLog): AuditReport {
  const c = new Collector();
  const settings = settingsOf(log.started);
  if (!log.started) c.notes.add('no run.started: settings are the defaults of src/rl/config.ts');
  else if (settings.defaulted.length)
    c.notes.add(`run.started.config lacks ${settings.defaulted.join(', ')}: the audit used defaults`);
  for (const d of log.duplicates)
    c.notes.add(`duplicate ${d.type} at seq ${seqOf(d)} (the first one was audited)`);
  const { errors, incomplete } = checkCompleteness(log);
  const checked = { rollouts: 0, labels: 0, steps: 0, rows: 0 };
  let lastCategory: Record<string, BoundaryCategory> = {};
  const poolIndex = new Map<string, { index: number; step: number }>();
  const offlineSeen = new Map<string, { step: number; record: OfflineTarget }>();
  const offline = getAlgorithm(settings.algo).offlineTargets === true;
  if (offline)
    c.notes.add(
      "offline-akbe: the frozen targets' tokens are taken as recorded (their checkpoint's sha256 is in each record)",
    );
  for (const s of log.steps.values()) {
    checkStepQuestions(c, s, settings, poolIndex);
    const version = stepVersion(log, s.step);
    checkStepVersion(c.check.bind(c), s.started, s.step, settings.maxStaleness);
    const results = auditRollouts(c, s, version, settings, checked);
    const targets = offline
      ? checkOfflineTargets((w, f, rec, want) => c.check(w, f, rec, want), s, settings, offlineSeen)
      : undefined;
    lastCategory = auditLearner(
      c,
      s,
      version,
      settings,
      results,
      lastCategory,
      checked,
      log.published,
      targets,
    );
  }
  c.mismatches.sort((a, b) => a.seq - b.seq);
  return {
    runId: log.runId,
    mismatches: c.mismatches,
    notes: [...c.notes],
    errors,
    incomplete,
    checked,
    settings,
  };
}

/** True when the audit found nothing wrong: no mismatch, no missing event, and run.finished present. */
export function auditPassed(r: AuditReport): boolean {
  return r.mismatches.length === 0 && r.errors.length === 0 && r.incomplete === null;
}

/** Step k's questions are distinct, and each question sits at one pool index across the run. */
function checkStepQuestions(
  c: Collector,
  s: StepLog,
  settings: AuditSettings,
  poolIndex: Map<string, { index: number; step: number }>,
): void {
  const e = s.started;
  if (!e) return;
  const where = { seq: seqOf(e), eventType: e.type, step: s.step };
  const ids = e.data.questionIds;
  c.check(where, 'questionIds (distinct)', ids.length, new Set(ids).size);
  if (settings.questionPoolSize === undefined) return;
  // The run machine draws step k's questions with sampleStepQuestions(poolSize, B, runSeed, k).
  checkPoolDraw(c, where, ids, settings, poolIndex, s.step);
}

function checkPoolDraw(
  c: Collector,
  where: Where,
  ids: readonly string[],
  settings: AuditSettings,
  poolIndex: Map<string, { index: number; step: number }>,
  step: number,
): void {
  const drawn = drawIndices(settings.questionPoolSize!, ids.length, settings.runSeed, step);
  if (!drawn) {
    c.check(where, 'questionIds.length', ids.length, `at most questionPoolSize ${settings.questionPoolSize}`);
    return;
  }
  ids.forEach((id, i) => {
    const seen = poolIndex.get(id);
    if (seen && seen.index !== drawn[i])
      c.check(
        where,
        `questionIds[${i}] pool index`,
        `${id} at ${drawn[i]}`,
        `${id} at ${seen.index} (step ${seen.step})`,
      );
    else if (!seen) poolIndex.set(id, { index: drawn[i], step });
  });
}

function drawIndices(pool: number, batch: number, seed: number, step: number): number[] | null {
  return batch > pool ? null : sampleStepQuestions(pool, batch, seed, step);
}

/** Rewards, answers, format, masks, tool calls and versions of every finished rollout of a step. */
function auditRollouts(
  c: Collector,
  s: StepLog,
  version: number,
  settings: AuditSettings,
  checked: AuditReport['checked'],
): Map<string, RolloutResult> {
  const results = new Map<string, RolloutResult>();
  for (const q of s.questions.values()) {
    const gold = q.assigned?.data.goldAnswers;
    if (!gold && q.rollouts.size)
      c.notes.add(`step ${s.step} ${q.questionId}: no question.assigned, gold answers unknown`);
    for (const r of q.rollouts.values()) {
      const done = r.completed;
      if (!done) continue;
      checked.rollouts++;
      const where = {
        seq: seqOf(done),
        eventType: done.type,
        step: s.step,
        questionId: q.questionId,
        rolloutId: r.rolloutId,
      };
      const outcome = recomputeOutcome(done, gold ?? [], settings);
      if (!outcome.fromText)
        c.notes.add('rollout.completed without segments: format flags taken as recorded');
      c.check(where, 'answer', done.data.answer, outcome.answer);
      c.check(where, 'formatOk', done.data.formatOk, outcome.formatOk);
      c.check(where, 'reward', done.data.reward, outcome.reward);
      c.check(where, 'policyVersion (on-policy)', done.meta.policyVersion, version);
      const rebuilt = responseFromTurns(r, settings.maxResponseTokens);
      if (rebuilt) {
        c.check(
          where,
          'responseTokenIds (from turns and observations)',
          done.data.responseTokenIds,
          rebuilt.tokens,
        );
        c.check(where, 'lossMask (from turns and observations)', done.data.lossMask, rebuilt.mask);
        c.check(where, 'toolCalls (tool.called events)', done.data.toolCalls, r.tools.length);
      }
      const masked = done.data.oldLogprobs.some((lp, i) => done.data.lossMask[i] === 0 && lp !== 0);
      c.check(where, 'oldLogprobs (0 on observation tokens)', masked ? 'non-zero' : 0, 0);
      const result = rolloutResultOf(done, { outcome, turns: r.turns.length });
      // Downstream (batch rows, loss tokens) uses the mask re-derived from the turns when there is one.
      if (rebuilt && rebuilt.tokens.length === result.responseTokens.length)
        result.responseMask = rebuilt.mask;
      results.set(r.rolloutId, result);
    }
    const g = q.group;
    if (!g) continue;
    const where = { seq: seqOf(g), eventType: g.type, step: s.step, questionId: q.questionId };
    for (const [key, path] of [
      ['withTool', 'with-tool'],
      ['noTool', 'no-tool'],
    ] as const) {
      const ids = g.data[key].rolloutIds;
      const present = [...q.rollouts.values()]
        .filter((r) => r.completed?.data.path === path)
        .sort((a, b) => a.completed!.data.index - b.completed!.data.index)
        .map((r) => r.rolloutId);
      c.check(where, `${key}.rolloutIds`, ids, present);
      c.check(
        where,
        `${key}.rewards`,
        g.data[key].rewards,
        ids.map((id) => results.get(id)?.reward ?? null),
      );
    }
  }
  return results;
}

/** Labels, targets, advantages, batch rows and metrics of one learner step. */
function auditLearner(
  c: Collector,
  s: StepLog,
  version: number,
  settings: AuditSettings,
  results: Map<string, RolloutResult>,
  lastCategory: Record<string, BoundaryCategory>,
  checked: AuditReport['checked'],
  published: RunLog['published'],
  offlineTargets?: Record<string, OfflineTarget>,
): Record<string, BoundaryCategory> {
  const labelled = [...s.questions.values()].filter((q) => q.label || q.group);
  if (labelled.length === 0) return lastCategory;
  const rolledOut = labelled
    .map((q) => groupOf(s.step, version, q, results))
    .filter((g) => g.withTool.length + g.noTool.length > 0);
  // Asynchronous runs: the version trained from, and the groups within maxStaleness.
  const { trainVersion, trained: groups } = auditStaleness(
    c.check.bind(c),
    s.step,
    version,
    settings.maxStaleness,
    rolledOut,
    s.learner,
  );
  if (groups.length === 0) return lastCategory;
  const learnerSeq = seqOf(s.learner);
  let prepared: ReturnType<typeof prepareStep>;
  try {
    prepared = prepareStep(
      {
        runSeed: settings.runSeed,
        batchQuestions: groups.length,
        miniBatchQuestions: settings.miniBatchQuestions,
        algo: settings.algo,
        algoOptions: settings.algoOptions,
        advantage: settings.advantage,
        targetSelection: settings.targetSelection,
        targetContext: settings.targetContext,
        akbeAggregation: settings.akbeAggregation,
        toolCallCount: settings.toolCallCount,
        losses: [],
        offlineTargets,
        initialVersion: version,
        padId: settings.padId,
        padTo: settings.padTo,
      },
      groups,
      lastCategory,
    );
  } catch (err) {
    c.check(
      { seq: learnerSeq, eventType: 'learner.step', step: s.step },
      'recomputation',
      'recorded step',
      `failed: ${(err as Error).message}`,
    );
    return lastCategory;
  }
  prepared.labels.forEach((label, i) => {
    const e = s.questions.get(label.questionId)?.label;
    if (!e) {
      c.notes.add(`step ${s.step} ${label.questionId}: no boundary.labeled recorded`);
      return;
    }
    checked.labels++;
    const where = { seq: seqOf(e), eventType: e.type, step: s.step, questionId: label.questionId };
    c.check(where, 'wt', e.data.wt, label.wt);
    c.check(where, 'nt', e.data.nt, label.nt);
    c.check(where, 'category', e.data.category, label.category);
    c.check(where, 'targetRolloutId', e.data.targetRolloutId, label.target?.rolloutId ?? null);
    c.check(where, 'selectionRule', e.data.selectionRule, selectionRuleOf(label, settings.targetSelection));
    c.check(where, 'tieBreakSeed', e.data.tieBreakSeed, label.tieBreakSeed);
    c.check(where, 'previousCategory', e.data.previousCategory, prepared.previous[i]);
  });
  const learner = s.learner;
  if (!learner) {
    c.notes.add(`step ${s.step}: no learner.step recorded (an unfinished step?)`);
    return prepared.lastCategory;
  }
  checked.steps++;
  const where = { seq: learnerSeq, eventType: learner.type, step: s.step };
  const m = learner.data.metrics;
  const sm = prepared.metrics;
  const wt = prepared.groups.flatMap((g) => g.withTool);
  const correct = wt.reduce((a, r) => a + r.reward, 0);
  c.check(where, 'policyVersionBefore', learner.data.policyVersionBefore, trainVersion);
  c.check(where, 'policyVersionAfter', learner.data.policyVersionAfter, trainVersion + 1);
  // The next step rolls out with the version this step published (synchronous), or a later one.
  if (!published.has(trainVersion + 1))
    c.notes.add(`step ${s.step}: no policy.published of version ${trainVersion + 1}`);
  c.check(where, 'metrics.em', m.em, sm.withToolEm);
  c.check(where, 'metrics.tc', m.tc, sm.meanToolCalls);
  // tp: the sink may form Σ correct as mean reward × count, so allow float rounding (1e-9 relative).
  const tp = sm.toolCallsPerBatch > 0 ? correct / sm.toolCallsPerBatch : null;
  const tpClose = m.tp !== null && tp !== null && Math.abs(m.tp - tp) <= 1e-9 * Math.max(1, Math.abs(tp));
  if (!tpClose) c.check(where, 'metrics.tp', m.tp, tp);
  c.check(where, 'metrics.categoryCounts', m.categoryCounts, sm.categories);
  c.check(where, 'metrics.boundaryShifts', m.boundaryShifts, sm.boundaryShifts);
  c.check(where, 'metrics.meanResponseLength', m.meanResponseLength, sm.meanResponseLength);
  c.check(where, 'metrics.toolCallsPerBatch', m.toolCallsPerBatch, sm.toolCallsPerBatch);
  checkOracleRates(c, where, s, prepared.groups, learner.data.extra, settings);
  const batch = learner.data.batch;
  if (!batch) {
    c.notes.add('learner.step without batch: advantages and trained rows not checked');
    return prepared.lastCategory;
  }
  const b = prepared.batch;
  c.check(where, 'batch.miniBatchSeed', batch.miniBatchSeed, prepared.miniBatchSeed);
  c.check(where, 'batch.lossTokens', batch.lossTokens, b.lossTokens);
  c.check(where, 'batch.T', batch.T, b.T);
  c.check(where, 'batch.rows.length', batch.rows.length, b.rows);
  b.rowInfo.forEach((info, i) => {
    const rec = batch.rows[i];
    if (!rec) return;
    checked.rows++;
    const at = `batch.rows[${i}]`;
    const rowWhere = { ...where, questionId: info.questionId, rolloutId: info.rolloutId };
    if (!c.check(rowWhere, `${at}.rolloutId`, rec.rolloutId, info.rolloutId)) return;
    c.check(rowWhere, `${at}.context`, rec.context, info.context);
    // The trainer's advantages are float32 (TrainBatch.advantages); a float64 record is accepted too.
    const adv = b.advantages[i];
    if (rec.advantage !== adv && Math.fround(rec.advantage) !== adv)
      c.check(rowWhere, `${at}.advantage`, rec.advantage, adv);
    c.check(rowWhere, `${at}.grpo`, rec.grpo, b.pgWeight[i] === 1);
    c.check(rowWhere, `${at}.akbe`, rec.akbe, b.akbeWeight[i] > 0);
    // The row's L_AKBE weight (per-target or pooled aggregation), recorded since session 3.
    if (rec.akbeWeight !== undefined) c.check(rowWhere, `${at}.akbeWeight`, rec.akbeWeight, b.akbeWeight[i]);
    c.check(
      rowWhere,
      `${at}.miniBatch`,
      rec.miniBatch,
      b.miniBatches.findIndex((mb) => mb.includes(i)),
    );
  });
  if (b.dpoPairs || batch.dpoPairs)
    checkDpoPairs((f, rec, want) => c.check(where, f, rec, want), batch, b, version, results);
  return prepared.lastCategory;
}

/**
 * The world's oracle rates in learner.step.extra (knownSearchRate, unknownNoSearchRate), recomputed
 * from the step's rollouts and the oracle each question.assigned carries. A recorded rate the log
 * cannot back, or a missing one it can, is a mismatch like any other.
 */
function checkOracleRates(
  c: Collector,
  where: Where,
  s: StepLog,
  groups: readonly QuestionGroup[],
  extra: Record<string, number>,
  settings: AuditSettings,
): void {
  const knownOf = (id: string) => s.questions.get(id)?.assigned?.data.known;
  if (!groups.some((g) => knownOf(g.questionId) !== undefined))
    c.notes.add('question.assigned carries no oracle (known): the oracle rates were not recomputed');
  const rates = oracleRatesExtra(oracleSearchRates(groups, knownOf, settings.toolCallCount));
  for (const key of ['knownSearchRate', 'unknownNoSearchRate'])
    c.check(where, `extra.${key}`, extra[key], rates[key]);
}
