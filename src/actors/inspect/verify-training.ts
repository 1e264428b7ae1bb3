import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RebuiltStep } from '../../audit/collector.js';
import type { ParamDifference, VerifyTrainingResult } from '../../audit/verify-record.js';
import { type Manifest, manifestOf } from '../../events/train-digest.js';
import { PolicyHost } from '../../gpu/policy-host.js';
import type { PolicyWorkerInit } from '../../gpu/policy-protocol.js';
import { decodeSafetensors, toFloat32 } from '../../gpu/safetensors.js';
import { trainLoop } from '../../train/train-loop.js';
import { copyPresent, TOKENIZER_FILES } from '../checkpoints/checkpoint-files.js';
import { isTemporary, manifestProblems, readCheckpointFiles } from '../checkpoints/checkpoint-integrity.js';

/** What policy.published records of a version. */
export interface PublishedRecord {
  sha256: string;
  /** null / undefined: a v1 policy.published (the weights' sha256 only). */
  manifest?: Manifest | null;
}

export interface VerifyTrainingInput {
  /** Each step's rebuilt request, in step order (AuditReport.requests). */
  steps: readonly RebuiltStep[];
  /** Every learner step the log holds (so one whose request was not rebuilt is not skipped). */
  loggedSteps: readonly number[];
  published: ReadonlyMap<number, PublishedRecord>;
  /** v0's directory, already checked against run.started's sha256 and manifest. */
  baseDir: string;
  /** The trainer's options (trainerOptionsOf of the run's config). */
  trainer: NonNullable<PolicyWorkerInit['trainer']>;
  /** run.started.trainerRuntime.intraOpThreads (0 or undefined: ORT's default). */
  threads?: number;
  batchInvariant: boolean;
  /** Asynchronous runs (maxStaleness >= 1): the decoupled objective's cap. */
  decoupled?: { behaviourWeightCap: number };
  /**
   * The stored copy of a version's files, when this machine has it (the run's directory): each
   * file is compared with the re-derived one too, and its weights give the largest difference.
   */
  storedCheckpoint?: (version: number) => Promise<ReadonlyMap<string, Uint8Array> | undefined>;
  /** After each verified step: how many of how many. */
  onStep?: (done: number, total: number) => void;
}

/** Re-trains every step from v0 and compares each result with its policy.published (see the top). */
export async function verifyTraining(input: VerifyTrainingInput): Promise<VerifyTrainingResult> {
  const work = await mkdtemp(join(tmpdir(), 'akbe-verify-'));
  const threads = input.threads ? { intraOpThreads: input.threads } : {};
  const host = await PolicyHost.start({
    checkpoint: input.baseDir,
    device: 'cpu',
    ...threads,
    batchInvariant: input.batchInvariant,
    trainer: input.trainer,
  });
  // DPO's reference as the trainer service starts it (v0, scoring only, the device's defaults).
  let reference: Promise<PolicyHost> | undefined;
  const referencePolicy = () => {
    reference ??= PolicyHost.start({ checkpoint: input.baseDir, device: 'cpu' });
    return reference;
  };
  try {
    return await verifySteps(input, host, referencePolicy, work);
  } finally {
    await host.close();
    await (await reference?.catch(() => undefined))?.close();
    await rm(work, { recursive: true, force: true });
  }
}

async function verifySteps(
  input: VerifyTrainingInput,
  host: PolicyHost,
  reference: () => Promise<PolicyHost>,
  work: string,
): Promise<VerifyTrainingResult> {
  const byStep = new Map(input.steps.map((s) => [s.step, s]));
  const total = input.loggedSteps.length;
  const versions: number[] = [];
  let held = 0; // the version the host's weights (and AdamW state) are at
  for (const [done, step] of input.loggedSteps.entries()) {
    const fail = (version: number, problems: string[], largest?: ParamDifference): VerifyTrainingResult => ({
      ok: false,
      verified: done,
      step,
      version,
      problems,
      ...(largest ? { largest } : {}),
    });
    const s = byStep.get(step);
    if (!s)
      return fail(held + 1, ['its train request could not be rebuilt from the log (see the audit notes)']);
    const from = s.request.policyVersion;
    if (from !== held)
      return fail(from + 1, [
        `it trained from v${from}, but re-derivation holds v${held} (steps must train consecutive versions)`,
      ]);
    const version = from + 1;
    const published = input.published.get(version);
    if (!published) return fail(version, [`no policy.published records v${version}`]);
    await trainLoop(host, s.request, {
      reference,
      ...(input.decoupled ? { decoupled: input.decoupled } : {}),
    });
    held = version;
    const dir = join(work, `v${version}`);
    const files = await savedCheckpoint(host, dir, input.baseDir);
    const derived = manifestOf(files); // hashed once: both comparisons below read it
    const problems = checkpointDifferences(version, published, derived);
    const stored = await input.storedCheckpoint?.(version).catch(() => undefined);
    if (stored) problems.push(...storedDifferences(version, derived, stored));
    if (problems.length) {
      // Context, not a finding of its own (the audit reports the digests): what the learner sent
      // was not what the log rebuilds either.
      if (s.digestMatches === false)
        problems.push(
          "the log's rebuilt request differs from the digest learner.step recorded (see the audit)",
        );
      const ours = files.get('model.safetensors');
      const weights = stored?.get('model.safetensors');
      return fail(version, problems, ours && weights ? largestDifference(ours, weights) : undefined);
    }
    versions.push(version);
    await rm(join(work, `v${version - 1}`), { recursive: true, force: true });
    input.onStep?.(done + 1, total);
  }
  return { ok: true, steps: total, versions };
}

/** The host's checkpoint as the trainer saves and publishes it: its files by name. */
async function savedCheckpoint(
  host: PolicyHost,
  dir: string,
  baseDir: string,
): Promise<Map<string, Uint8Array>> {
  await mkdir(dir, { recursive: true });
  await host.saveCheckpoint(dir);
  // Publishing copies the base's tokenizer files into every version (checkpoints.ts publish).
  await copyPresent(baseDir, dir, TOKENIZER_FILES);
  const files = await readCheckpointFiles(dir);
  for (const name of [...files.keys()]) if (isTemporary(name)) files.delete(name);
  return files;
}

/** Every file against the recorded manifest, or the weights against the recorded sha256 (v1 logs). */
function checkpointDifferences(version: number, published: PublishedRecord, derived: Manifest): string[] {
  if (published.manifest) return manifestProblems(version, published.manifest, derived);
  const sha = derived['model.safetensors'] ?? 'none';
  return sha === published.sha256
    ? []
    : [
        `model.safetensors has sha256 ${sha.slice(0, 12)}…, policy.published of v${version} records ${published.sha256.slice(0, 12)}…`,
      ];
}

/** The stored copy's files against the re-derived ones (a file replaced after it was published). */
function storedDifferences(
  version: number,
  want: Manifest,
  stored: ReadonlyMap<string, Uint8Array>,
): string[] {
  const got = manifestOf(stored);
  const problems: string[] = [];
  for (const name of Object.keys(want).sort())
    if (got[name] !== undefined && got[name] !== want[name])
      problems.push(
        `the stored v${version} ${name} has sha256 ${got[name].slice(0, 12)}…, re-derived ${want[name].slice(0, 12)}…`,
      );
  return problems;
}

/** The largest |derived - published| over the tensors both weights files hold (NaN counts as largest). */
export function largestDifference(derived: Uint8Array, published: Uint8Array): ParamDifference | undefined {
  let a: ReturnType<typeof decodeSafetensors>;
  let b: ReturnType<typeof decodeSafetensors>;
  try {
    a = decodeSafetensors(derived, 'derived model.safetensors');
    b = decodeSafetensors(published, 'published model.safetensors');
  } catch {
    return undefined; // a published file that is not safetensors: the sha256 difference says enough
  }
  let best: ParamDifference | undefined;
  let bestDiff = -1;
  for (const [name, t] of a.tensors) {
    const u = b.tensors.get(name);
    if (!u) continue;
    const x = toFloat32(t);
    const y = toFloat32(u);
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const d = Math.abs(x[i] - y[i]);
      const diff = Number.isNaN(d) ? Number.POSITIVE_INFINITY : d;
      if (diff > bestDiff) {
        bestDiff = diff;
        best = { tensor: name, index: i, derived: x[i], published: y[i] };
      }
    }
  }
  return bestDiff > 0 ? best : undefined;
}
