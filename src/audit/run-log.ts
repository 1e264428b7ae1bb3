/**
 * A run's event log folded into one structure the audit and the replay read: run → steps →
 * questions → rollouts, each event kept whole with its JetStream sequence (`meta.seq`), so that a
 * mismatch can name the event it was found in. Pure: events in, structure out; never throws on
 * events it does not expect (a duplicate keeps the first, an orphan is listed in `orphans`).
 */
import type { AkbeEvent, EventOf } from '../events/catalog.js';

export interface RolloutLog {
  rolloutId: string;
  started?: EventOf<'rollout.started'>;
  turns: EventOf<'rollout.turn'>[];
  tools: EventOf<'tool.called'>[];
  completed?: EventOf<'rollout.completed'>;
}

export interface QuestionLog {
  questionId: string;
  assigned?: EventOf<'question.assigned'>;
  /** By rolloutId, in the order first seen. */
  rollouts: Map<string, RolloutLog>;
  group?: EventOf<'group.completed'>;
  label?: EventOf<'boundary.labeled'>;
}

export interface StepLog {
  step: number;
  started?: EventOf<'step.started'>;
  /** By questionId, in the order first seen. */
  questions: Map<string, QuestionLog>;
  learner?: EventOf<'learner.step'>;
}

export interface RunLog {
  runId: string | null;
  started?: EventOf<'run.started'>;
  /** By step number, ascending. */
  steps: Map<number, StepLog>;
  /** policy.published by version (0 = the initial policy, k+1 = after step k). */
  published: Map<number, EventOf<'policy.published'>>;
  finished?: EventOf<'run.finished'>;
  /** Events recorded twice (same type and identity); the first one is kept. */
  duplicates: AkbeEvent[];
  events: number;
}

/** The stream sequence of an event, 0 when it was never stored (an in-memory event). */
export const seqOf = (e: { meta: { seq?: number } } | undefined): number => e?.meta.seq ?? 0;

export function emptyRunLog(): RunLog {
  return { runId: null, steps: new Map(), published: new Map(), duplicates: [], events: 0 };
}

function stepOf(log: RunLog, step: number): StepLog {
  let s = log.steps.get(step);
  if (!s) {
    s = { step, questions: new Map() };
    log.steps.set(step, s);
  }
  return s;
}

function questionOf(log: RunLog, step: number, questionId: string): QuestionLog {
  const s = stepOf(log, step);
  let q = s.questions.get(questionId);
  if (!q) {
    q = { questionId, rollouts: new Map() };
    s.questions.set(questionId, q);
  }
  return q;
}

function rolloutOf(log: RunLog, step: number, questionId: string, rolloutId: string): RolloutLog {
  const q = questionOf(log, step, questionId);
  let r = q.rollouts.get(rolloutId);
  if (!r) {
    r = { rolloutId, turns: [], tools: [] };
    q.rollouts.set(rolloutId, r);
  }
  return r;
}

/** Adds one event to the log (mutates `log`). */
export function addEvent(log: RunLog, e: AkbeEvent): RunLog {
  log.events++;
  log.runId ??= e.meta.runId;
  const keep = <T>(current: T | undefined, set: () => void) => {
    if (current === undefined) set();
    else log.duplicates.push(e);
  };
  switch (e.type) {
    case 'run.started':
      keep(log.started, () => (log.started = e));
      break;
    case 'run.finished':
      keep(log.finished, () => (log.finished = e));
      break;
    case 'step.started': {
      const s = stepOf(log, e.data.step);
      keep(s.started, () => (s.started = e));
      break;
    }
    case 'learner.step': {
      const s = stepOf(log, e.meta.step);
      keep(s.learner, () => (s.learner = e));
      break;
    }
    case 'policy.published':
      keep(log.published.get(e.data.version), () => log.published.set(e.data.version, e));
      break;
    case 'question.assigned': {
      const q = questionOf(log, e.meta.step, e.meta.questionId);
      keep(q.assigned, () => (q.assigned = e));
      break;
    }
    case 'group.completed': {
      const q = questionOf(log, e.meta.step, e.meta.questionId);
      keep(q.group, () => (q.group = e));
      break;
    }
    case 'boundary.labeled': {
      const q = questionOf(log, e.meta.step, e.meta.questionId);
      keep(q.label, () => (q.label = e));
      break;
    }
    case 'rollout.started': {
      const r = rolloutOf(log, e.meta.step, e.meta.questionId, e.meta.rolloutId);
      keep(r.started, () => (r.started = e));
      break;
    }
    case 'rollout.completed': {
      const r = rolloutOf(log, e.meta.step, e.meta.questionId, e.meta.rolloutId);
      keep(r.completed, () => (r.completed = e));
      break;
    }
    case 'rollout.turn': {
      const r = rolloutOf(log, e.meta.step, e.meta.questionId, e.meta.rolloutId);
      if (r.turns.some((t) => t.data.turn === e.data.turn)) log.duplicates.push(e);
      else r.turns.push(e);
      break;
    }
    case 'tool.called': {
      const r = rolloutOf(log, e.meta.step, e.meta.questionId, e.meta.rolloutId);
      if (r.tools.some((t) => t.data.turn === e.data.turn)) log.duplicates.push(e);
      else r.tools.push(e);
      break;
    }
    case 'eval.completed':
      // An evaluation's rollouts are not stored, so there is nothing to recompute; the
      // experiment report (src/experiments) reads these.
      break;
    default: {
      const _exhaustive: never = e;
      return _exhaustive;
    }
  }
  return log;
}

/** Folds events (in stream order) into a RunLog; steps come out sorted by number. */
export function foldRunLog(events: Iterable<AkbeEvent>): RunLog {
  const log = emptyRunLog();
  for (const e of events) addEvent(log, e);
  log.steps = new Map([...log.steps].sort(([a], [b]) => a - b));
  for (const s of log.steps.values())
    for (const q of s.questions.values())
      for (const r of q.rollouts.values()) {
        r.turns.sort((a, b) => a.data.turn - b.data.turn);
        r.tools.sort((a, b) => a.data.turn - b.data.turn);
      }
  return log;
}
