/**
 * `akbe replay --verify-training`: the CLI around src/actors/inspect/verify-training.ts. It finds
 * and checks the run's v0 (`--base DIR`, the run's own directory under the home, or the object
 * store), builds the trainer as the run's trainer role did (run.started's config and trainer
 * runtime), draws a progress bar, and prints one verdict line.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuditReport } from '../../audit/audit.js';
import type { RunLog } from '../../audit/run-log.js';
import type { VerifyTrainingResult } from '../../audit/verify-record.js';
import type { Manifest } from '../../events/train-digest.js';
import { type CommandContext, UsageError } from '../command.js';

/** The verification's outcome as `--json` prints it (under `verifyTraining`). */
export type VerifyVerdict = VerifyTrainingResult;

/** A refusal before any training: the run cannot be verified here, and why. */
export class VerifyRefused extends Error {
  override name = 'VerifyRefused';
}

/** Runs the verification and writes its lines; resolves to the verdict (ok or the first difference). */
export async function verifyRunTraining(
  ctx: CommandContext,
  log: RunLog,
  report: AuditReport,
  opts: { home: string; fromFile: boolean },
): Promise<VerifyVerdict> {
  const started = log.started;
  if (!started || !log.runId) throw new VerifyRefused('the log has no run.started: nothing to verify from');
  if (!report.requests) throw new Error('verifyRunTraining: the audit kept no requests');
  const runtime = started.data.trainerRuntime;
  const notes = runtimeNotes(runtime);
  if (report.requests.some((r) => r.digestMatches === null))
    notes.push(
      'this log records no train request digests (learner.step v1): the requests rebuilt from it are trained on unchecked against what the learner sent',
    );
  for (const n of notes) ctx.err.write(`akbe replay: ${n}\n`);
  const { runSpecOf } = await import('../../actors/roles/roles.js');
  const { trainerOptionsOf } = await import('../../actors/roles/trainer-options.js');
  const spec = runSpecOf(started.data.config as Record<string, unknown>);
  const base = await baseOf(ctx, log, opts);
  try {
    const { verifyTraining } = await import('../../actors/inspect/verify-training.js');
    const { Progress } = await import('../../util/progress.js');
    const loggedSteps = [...log.steps.values()].filter((s) => s.learner).map((s) => s.step);
    const bar = new Progress('verify training', { total: loggedSteps.length, stream: ctx.err });
    const runDir = join(opts.home, 'runs', log.runId, 'checkpoints');
    const result = await verifyTraining({
      steps: report.requests,
      loggedSteps,
      published: new Map(
        [...log.published].map(([v, e]) => [v, { sha256: e.data.sha256, manifest: e.data.manifest ?? null }]),
      ),
      baseDir: base.dir,
      trainer: {
        ...trainerOptionsOf(spec.train),
        ...(runtime?.optimizer ? { optimizer: runtime.optimizer } : {}),
      },
      threads: runtime?.intraOpThreads || undefined,
      batchInvariant: spec.train.batchInvariantDecode,
      ...(spec.train.maxStaleness > 0
        ? { decoupled: { behaviourWeightCap: spec.train.behaviourWeightCap } }
        : {}),
      storedCheckpoint: async (v) => {
        const dir = join(runDir, `v${v}`);
        if (!existsSync(join(dir, 'model.safetensors'))) return undefined; // pruned, or another machine's
        const { readCheckpointFiles } = await import('../../actors/checkpoints/checkpoint-integrity.js');
        return readCheckpointFiles(dir);
      },
      onStep: () => bar.tick(),
    });
    bar.finish();
    await keepVerdict(ctx, opts, log.runId, log.events, result);
    return result;
  } finally {
    await base.cleanup();
  }
}

/**
 * Keeps the verdict for the dashboard's audit panel (a viewer does not re-train on a click), in
 * `<home>/runs/<run>/`. An exported log verified with --file is kept only when this home holds
 * that run: a verdict about a run from elsewhere would sit beside nothing and name nothing here.
 */
async function keepVerdict(
  ctx: CommandContext,
  opts: { home: string; fromFile: boolean },
  runId: string,
  events: number,
  result: VerifyVerdict,
): Promise<void> {
  const runsDir = join(opts.home, 'runs');
  if (opts.fromFile && !existsSync(join(runsDir, runId))) {
    ctx.err.write(
      `akbe replay: the verdict was not kept: ${opts.home} holds no run ${runId} (the dashboard shows verdicts of its home's runs)\n`,
    );
    return;
  }
  const { writeVerifyRecord } = await import('../../audit/verify-record.js');
  const written = await writeVerifyRecord(runsDir, {
    runId,
    at: new Date().toISOString(),
    events,
    result,
  }).catch((err: Error) => {
    ctx.err.write(`akbe replay: the verdict was not kept for the dashboard: ${err.message}\n`);
    return null;
  });
  if (written)
    ctx.err.write(`akbe replay: verdict kept in ${written} (the dashboard's audit panel shows it)\n`);
}

const steps = (n: number) => `${n} step${n === 1 ? '' : 's'}`;

/** The verdict as one line (stdout). */
export function formatVerdict(r: VerifyVerdict): string {
  if (r.ok)
    return `verified training: ${steps(r.steps)} re-derived from v0; every published checkpoint (${r.versions.length ? `v1..v${r.versions.at(-1)}` : 'none'}) matches bit for bit\n`;
  const d = r.largest;
  const largest = d
    ? `; largest parameter difference ${d.tensor}[${d.index}]: re-derived ${d.derived}, published ${d.published} (|diff| ${Number(Math.abs(d.derived - d.published).toPrecision(6))})`
    : '';
  return `TRAINING MISMATCH step ${r.step} (v${r.version}), after ${steps(r.verified)} verified: ${r.problems.join('; ')}${largest}\n`;
}

/** What the recorded trainer runtime means for bit-equality here (refuses where it cannot hold). */
function runtimeNotes(runtime: NonNullable<RunLog['started']>['data']['trainerRuntime']): string[] {
  if (!runtime)
    return [
      'the run trained in another process (run.started records no trainer runtime): verifying on the CPU provider with ORT default threads',
    ];
  if (runtime.executionProvider !== 'cpu')
    throw new VerifyRefused(
      `the run trained on the ${runtime.executionProvider} provider, where bit-equality is not claimed (docs/training.md); verification compares bits on the CPU provider only`,
    );
  if (runtime.dtype !== 'float32')
    throw new VerifyRefused(`the run trained in ${runtime.dtype}; verification re-trains in float32 only`);
  return [];
}

/**
 * v0's directory, checked against run.started's basePolicySha256 and basePolicyManifest: `--base
 * DIR`, else the run's own v0 under the home, else (reading from NATS) the object store's copy.
 */
async function baseOf(
  ctx: CommandContext,
  log: RunLog,
  opts: { home: string; fromFile: boolean },
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const config = log.started!.data.config as Record<string, unknown>;
  const sha = typeof config.basePolicySha256 === 'string' ? config.basePolicySha256 : undefined;
  if (!sha) throw new VerifyRefused('run.started records no basePolicySha256: v0 cannot be checked');
  const { baseManifestOf } = await import('../../actors/checkpoints/checkpoint-records.js');
  const manifest = baseManifestOf(config);
  const given = ctx.flags.base as string | undefined;
  const own = join(opts.home, 'runs', log.runId!, 'checkpoints', 'v0');
  const none = async () => undefined;
  if (given !== undefined || existsSync(join(own, 'model.safetensors'))) {
    const dir = given ?? own;
    await checkBase(dir, sha, manifest);
    return { dir, cleanup: none };
  }
  if (opts.fromFile)
    throw new UsageError(
      `--verify-training with --file needs --base DIR: the run's base policy (${String(config.basePolicy)} when it started), checked against run.started's sha256`,
    );
  const { connectAkbeNats } = await import('../../actors/nats/connection.js');
  const { CheckpointStore } = await import('../../actors/checkpoints/checkpoints.js');
  const nats = await connectAkbeNats({ url: ctx.flags.nats as string | undefined, home: opts.home });
  const cache = await mkdtemp(join(tmpdir(), 'akbe-verify-v0-'));
  try {
    const store = await CheckpointStore.open(nats.nc, log.runId!, cache);
    store.expect(0, sha, manifest);
    return { dir: await store.local(0), cleanup: () => rm(cache, { recursive: true, force: true }) };
  } catch (err) {
    await rm(cache, { recursive: true, force: true });
    throw err;
  } finally {
    await nats.close();
  }
}

async function checkBase(dir: string, sha: string, manifest: Manifest | null): Promise<void> {
  const { readCheckpointFiles, sha256Hex, manifestProblems } = await import(
    '../../actors/checkpoints/checkpoint-integrity.js'
  );
  const { CHECKPOINT_FILES, TOKENIZER_FILES } = await import('../../actors/checkpoints/checkpoint-files.js');
  const { manifestOf } = await import('../../events/train-digest.js');
  if (!existsSync(join(dir, 'model.safetensors')))
    throw new VerifyRefused(`--base ${dir}: no model.safetensors there`);
  const files = await readCheckpointFiles(dir);
  const weights = sha256Hex(files.get('model.safetensors')!);
  if (weights !== sha)
    throw new VerifyRefused(
      `${dir}/model.safetensors has sha256 ${weights.slice(0, 12)}…, run.started records ${sha.slice(0, 12)}… for v0: not this run's base`,
    );
  if (!manifest) return; // a log from before v0's manifest: the weights are all it records
  // Only the files a load reads: a base directory may hold others (a README) that v0 never had.
  const loaded = new Set<string>([...CHECKPOINT_FILES, ...TOKENIZER_FILES]);
  const present = new Map([...files].filter(([name]) => loaded.has(name)));
  const problems = manifestProblems(0, manifest, manifestOf(present));
  if (problems.length) throw new VerifyRefused(`${dir} is not this run's v0: ${problems.join('; ')}`);
}
