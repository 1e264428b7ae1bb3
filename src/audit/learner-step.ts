/**
 * The audit of one learner step, re-derived with the learner's own pure `prepareStep`
 * (src/machines/learner.ts), so the audit and the learner cannot drift apart: boundary labels,
 * targets with their tie-break seeds, the step's versions and metrics, the oracle rates, the
 * trained batch row by row, and (dpo-akbe) its preference pairs.
 */
import type { BoundaryCategory } from '../events/catalog.js';
import { trainRequestDigest } from '../events/train-digest.js';
import { prepareStep, selectionRuleOf } from '../machines/learner.js';
import { oracleRatesExtra, oracleSearchRates } from '../rl/metrics.js';
import type { OfflineTarget } from '../rl/offline.js';
import type { QuestionGroup, RolloutResult } from '../rl/types.js';
import type { AuditCounts, Collector, Where } from './collector.js';
import { checkDpoPairs } from './dpo-pairs.js';
import { rebuiltRequest } from './rebuilt-request.js';
import { type AuditSettings, groupOf } from './recompute.js';
import { type RunLog, type StepLog, seqOf } from './run-log.js';
import { auditStaleness } from './staleness.js';

/** Labels, targets, advantages, batch rows and metrics of one learner step. */
export function auditLearner(
  c: Collector,
  s: StepLog,
  version: number,
  settings: AuditSettings,
  results: Map<string, RolloutResult>,
  lastCategory: Record<string, BoundaryCategory>,
  checked: AuditCounts,
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
  checkLabels(c, s, prepared, settings, checked);
  const learner = s.learner;
  if (!learner) {
    c.notes.add(`step ${s.step}: no learner.step recorded (an unfinished step?)`);
    return prepared.lastCategory;
  }
  checked.steps++;
  const where = { seq: learnerSeq, eventType: learner.type, step: s.step };
  checkStepMetrics(c, where, s, learner, prepared, trainVersion, published, settings);
  const batch = learner.data.batch;
  if (!batch) {
    c.notes.add('learner.step without batch: advantages and trained rows not checked');
    return prepared.lastCategory;
  }
  const b = prepared.batch;
  checkBatchRows(c, where, batch, prepared, checked);
  checkRebuiltRequest(c, where, learner, prepared, trainVersion, settings);
  if (b.dpoPairs || batch.dpoPairs)
    checkDpoPairs((f, rec, want) => c.check(where, f, rec, want), batch, b, version, results);
  return prepared.lastCategory;
}

type Prepared = ReturnType<typeof prepareStep>;

/**
 * The request rebuilt from the log (rebuilt-request.ts) against the digest of what the learner
 * sent: a batch, loss term or hyperparameter other than the log's is a mismatch at this step.
 */
function checkRebuiltRequest(
  c: Collector,
  where: Where,
  learner: NonNullable<StepLog['learner']>,
  prepared: Prepared,
  trainVersion: number,
  settings: AuditSettings,
): void {
  const sent = learner.data.requestSha256 ?? null;
  if ('missing' in settings.request) {
    // A v1 log records no digest: audit.ts notes that; only a request it cannot rebuild is said here.
    if (sent !== null || c.requests)
      c.notes.add(`train requests not rebuilt from the log: ${settings.request.missing}`);
    return;
  }
  const request = rebuiltRequest(settings.request, learner.meta.step, trainVersion, prepared.batch);
  // A v1 log (no digest recorded): the request is still rebuilt for --verify-training, unchecked.
  const digestMatches =
    sent === null
      ? null
      : c.check(
          where,
          'requestSha256 (rebuilt from the log)',
          sent,
          trainRequestDigest(learner.meta.runId, request),
        );
  c.requests?.push({ step: learner.meta.step, request, digestMatches });
}

/** Each boundary.labeled against the label the learner's own rule gives. */
function checkLabels(
  c: Collector,
  s: StepLog,
  prepared: Prepared,
  settings: AuditSettings,
  checked: AuditCounts,
): void {
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
}

/** The step's versions and metrics (em, tc, tp, categories, shifts, lengths, oracle rates). */
function checkStepMetrics(
  c: Collector,
  where: Where,
  s: StepLog,
  learner: NonNullable<StepLog['learner']>,
  prepared: Prepared,
  trainVersion: number,
  published: RunLog['published'],
  settings: AuditSettings,
): void {
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
}

/** The trained batch row by row: ids, contexts, advantages, loss memberships, mini-batches. */
function checkBatchRows(
  c: Collector,
  where: Where,
  batch: NonNullable<NonNullable<StepLog['learner']>['data']['batch']>,
  prepared: Prepared,
  checked: AuditCounts,
): void {
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
