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
 *
 * The checks, one module each: step-questions.ts, rollouts.ts, learner-step.ts, and
 * completeness.ts, staleness.ts, offline-targets.ts, dpo-pairs.ts; collector.ts gathers what they
 * find.
 */
import type { AkbeEvent, BoundaryCategory, EventOf } from '../events/catalog.js';
import { getAlgorithm } from '../rl/algorithms/index.js';
import type { OfflineTarget } from '../rl/offline.js';
import { checkManifests } from './checkpoint-manifests.js';
import { type AuditCounts, Collector, type Mismatch, type RebuiltStep } from './collector.js';
import { checkCompleteness } from './completeness.js';
import { auditLearner } from './learner-step.js';
import { checkOfflineTargets } from './offline-targets.js';
import { type AuditSettings, settingsOf, stepVersion } from './recompute.js';
import { auditRollouts } from './rollouts.js';
import { foldRunLog, type RunLog, seqOf } from './run-log.js';
import { checkStepVersion } from './staleness.js';
import { checkStepQuestions } from './step-questions.js';

export type { Mismatch, RebuiltStep } from './collector.js';

export interface AuditReport {
  runId: string | null;
  mismatches: Mismatch[];
  /** Things the log does not hold, so they were not checked (never a failure by themselves). */
  notes: string[];
  /** Expected events that are missing or duplicated (completeness.ts): each fails the audit. */
  errors: string[];
  /** Why the log is incomplete (no run.finished), or null. */
  incomplete: string | null;
  checked: AuditCounts;
  settings: AuditSettings;
  /** With `keepRequests`: each step's train request rebuilt from the log, in step order. */
  requests?: RebuiltStep[];
}

/** Audits one run from its events (each carrying `meta.seq`, as `EventStore.replay` yields them). */
export function auditRun(events: Iterable<AkbeEvent>, opts: AuditOptions = {}): AuditReport {
  const log = foldRunLog(events);
  return auditRunLog(log, opts);
}

export interface AuditOptions {
  /**
   * The run's checkpoint directories (`<runDir>/checkpoints`), when on this machine: each
   * version there is checked against its recorded manifest digest (checkpoint-manifests.ts).
   */
  checkpointsDir?: string;
  /** Keep each step's rebuilt train request in the report (`requests`), for `--verify-training`. */
  keepRequests?: boolean;
}

export function auditRunLog(log: RunLog, opts: AuditOptions = {}): AuditReport {
  const c = new Collector({ keepRequests: opts.keepRequests });
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
    checkRequestDigest(c, s.learner, log.published);
  }
  checkManifests(c, log.published, opts.checkpointsDir);
  c.mismatches.sort((a, b) => a.seq - b.seq);
  return {
    runId: log.runId,
    mismatches: c.mismatches,
    notes: [...c.notes],
    errors,
    incomplete,
    checked,
    settings,
    ...(c.requests ? { requests: c.requests } : {}),
  };
}

/** True when the audit found nothing wrong: no mismatch, no missing event, and run.finished present. */
export function auditPassed(r: AuditReport): boolean {
  return r.mismatches.length === 0 && r.errors.length === 0 && r.incomplete === null;
}

/**
 * The trainer trained on what the learner sent: learner.step's request digest (as sent) equals
 * the one policy.published records (as the trainer received it). v1 logs recorded neither.
 */
function checkRequestDigest(
  c: Collector,
  learner: EventOf<'learner.step'> | undefined,
  published: ReadonlyMap<number, EventOf<'policy.published'>>,
): void {
  if (!learner) return;
  const sent = learner.data.requestSha256 ?? null;
  const trained = published.get(learner.data.policyVersionAfter)?.data.requestSha256 ?? null;
  if (sent === null || trained === null) {
    c.notes.add(
      'train request digests: not supported by this log (recorded from learner.step v2 / policy.published v2)',
    );
    return;
  }
  c.check(
    { seq: learner.meta.seq ?? 0, eventType: 'learner.step', step: learner.meta.step },
    'requestSha256',
    sent,
    trained,
  );
}
