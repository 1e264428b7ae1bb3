/** The JSON the dashboard API returns (mirrors of src/dashboard and src/events types). */
export type { StepPoint } from '../../src/dashboard/points.js';

import type { Mismatch } from '../../src/audit/audit.js';
import type { VerifyRecord } from '../../src/audit/verify-record.js';
import type { StepPoint } from '../../src/dashboard/points.js';

export type { Mismatch };

export interface RunSummary {
  runId: string | null;
  status: string;
  algo: string | null;
  startedAt: number | null;
  finishedAt: number | null;
  steps: number;
  lastStep: number | null;
  policyVersion: number;
  latest: {
    em: number;
    tc: number;
    tp: number | null;
    categoryCounts: Record<string, number>;
    boundaryShifts: number;
  } | null;
  reason: string | null;
}

export interface RunView {
  runId: string;
  summary: RunSummary;
  started: {
    algo: string;
    config: Record<string, unknown>;
    seeds: Record<string, number>;
    worldRef: string;
    policyRef: string;
    akbeVersion: string;
  } | null;
  points: StepPoint[];
}

export interface AuditResult {
  verdict: 'clean' | 'mismatch';
  report: { mismatches: Mismatch[]; notes: string[]; checked: Record<string, number> };
  /** The last `akbe replay --verify-training` verdict kept for the run, or null. */
  verifyTraining: VerifyRecord | null;
}
