/**
 * resume-point: where a run stands, for `akbe train --resume`: whether it started and finished,
 * the last published policy (the step to continue after and the version to load), each question's
 * last boundary category (the learner's shift counts continue from them) and every dedupe id in
 * the log (the sink skips what is already stored, even past JetStream's duplicate window).
 * The fold owns its state: `known`, `publishedSha` and `labels` grow in place (copying them per event would
 * make a long run's fold quadratic).
 */
import { type BoundaryCategory, EVENT_TYPES, type EventOf } from '../catalog.js';
import { defineProjection } from '../projection.js';

/** Where a run stands for `--resume`: started or finished, the last published version, each question's last category, every dedupe id. */
export interface ResumePoint {
  /** Dedupe ids of every event in the log. */
  known: Set<string>;
  runStarted: EventOf<'run.started'> | null;
  /** The last version training published (version 0, the base, is not a training step's). */
  lastPublished: { step: number; version: number } | null;
  /** The sha256 of each published version's weights (a checkpoint fetched is checked against it). */
  publishedSha: Map<number, string>;
  /** Each published version's manifest (null: a v1 policy.published, which recorded none). */
  publishedManifest: Map<number, Record<string, string> | null>;
  /** Each question's category at its last labeling in a published step (see `lastCategories`). */
  labels: Map<string, Array<{ step: number; category: BoundaryCategory }>>;
  finished: boolean;
}

/** The projection `akbe train --resume` reads (ResumePoint). */
export const resumePoint = defineProjection({
  name: 'resume-point',
  handles: EVENT_TYPES,
  initial: (): ResumePoint => ({
    known: new Set(),
    runStarted: null,
    lastPublished: null,
    publishedSha: new Map(),
    publishedManifest: new Map(),
    labels: new Map(),
    finished: false,
  }),
  evolve(s, e): ResumePoint {
    s.known.add(e.meta.dedupeId);
    switch (e.type) {
      case 'run.started':
        return { ...s, runStarted: e };
      case 'policy.published':
        s.publishedSha.set(e.data.version, e.data.sha256);
        s.publishedManifest.set(e.data.version, e.data.manifest ?? null);
        return e.data.version > 0
          ? { ...s, lastPublished: { step: e.meta.step, version: e.data.version } }
          : s;
      case 'boundary.labeled': {
        const list = s.labels.get(e.meta.questionId) ?? [];
        list.push({ step: e.meta.step, category: e.data.category });
        s.labels.set(e.meta.questionId, list);
        return s;
      }
      case 'run.finished':
        return { ...s, finished: true };
      default:
        return s;
    }
  },
});

/** The last step a run completed (-1: none) and the version it continues with. */
export function resumedFrom(p: ResumePoint): { step: number; version: number } {
  return { step: p.lastPublished?.step ?? -1, version: p.lastPublished?.version ?? 0 };
}

/**
 * The learner's memory of each question's category: its last label in a step that was published.
 * Labels of the step being redone (stored before a crash) must not count, or that step's boundary
 * shifts would compare it with itself.
 */
export function lastCategories(p: ResumePoint): Record<string, BoundaryCategory> {
  const done = p.lastPublished?.step ?? -1;
  const out: Record<string, BoundaryCategory> = {};
  for (const [q, list] of p.labels) {
    const last = list.filter((l) => l.step <= done).at(-1);
    if (last) out[q] = last.category;
  }
  return out;
}
