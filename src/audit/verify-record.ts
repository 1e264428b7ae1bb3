/**
 * The verdict of `akbe replay --verify-training` (src/actors/inspect/verify-training.ts) and where
 * it is kept: `<home>/runs/<run>/verify-training.json`, written by the command and shown by the
 * dashboard's audit panel. Verification costs the run's training time, so the dashboard (a
 * read-only viewer) shows the last one rather than starting one on a page click.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RUN_ID_PATTERN } from '../events/catalog.js';

/** The largest elementwise difference between the re-derived and the published weights. */
export interface ParamDifference {
  tensor: string;
  index: number;
  derived: number;
  published: number;
}

export type VerifyTrainingResult =
  | { ok: true; steps: number; versions: number[] }
  | {
      ok: false;
      /** Steps verified before the failing one. */
      verified: number;
      step: number;
      /** The version the failing step should have published. */
      version: number;
      /** What differs (files and sha256s), or why the step could not be verified. */
      problems: string[];
      largest?: ParamDifference;
    };

/** What the file holds: the verdict, when, and how much of the log it covered. */
export interface VerifyRecord {
  runId: string;
  /** ISO time the verification finished. */
  at: string;
  /** Events of the log it verified (a run that went on since has more). */
  events: number;
  result: VerifyTrainingResult;
}

export const VERIFY_RECORD_FILE = 'verify-training.json';

/** `<runsDir>/<run>/verify-training.json`; null for a run id that is not one (no path escapes). */
export function verifyRecordPath(runsDir: string, runId: string): string | null {
  return RUN_ID_PATTERN.test(runId) ? join(runsDir, runId, VERIFY_RECORD_FILE) : null;
}

/** Writes the record whole or not at all (a temporary file renamed over the old one). */
export async function writeVerifyRecord(runsDir: string, record: VerifyRecord): Promise<string> {
  const file = verifyRecordPath(runsDir, record.runId);
  if (!file) throw new RangeError(`not a run id: ${JSON.stringify(record.runId)}`);
  await mkdir(join(runsDir, record.runId), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  await rename(tmp, file);
  return file;
}

/** The run's last record, or null when there is none or it is not one (a damaged or foreign file). */
export async function readVerifyRecord(runsDir: string, runId: string): Promise<VerifyRecord | null> {
  const file = verifyRecordPath(runsDir, runId);
  if (!file) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    return null;
  }
  return isVerifyRecord(raw, runId) ? raw : null;
}

function isVerifyRecord(x: unknown, runId: string): x is VerifyRecord {
  if (typeof x !== 'object' || x === null) return false;
  const r = x as Record<string, unknown>;
  const res = r.result as Record<string, unknown> | undefined;
  if (r.runId !== runId || typeof r.at !== 'string' || !Number.isInteger(r.events)) return false;
  if (typeof res !== 'object' || res === null) return false;
  if (res.ok === true) return Number.isInteger(res.steps) && Array.isArray(res.versions);
  return (
    res.ok === false &&
    Number.isInteger(res.step) &&
    Number.isInteger(res.version) &&
    Number.isInteger(res.verified) &&
    Array.isArray(res.problems) &&
    res.problems.every((p) => typeof p === 'string')
  );
}
