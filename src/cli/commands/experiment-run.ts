/**
 * The grid runner behind `akbe experiment run`: each planned run (src/experiments/spec.ts) is an
 * ordinary event-sourced training run, started through the training job of `akbe train`.
 *
 * Where a run stands is read from its log (run.started / run.finished only):
 *   - finished and completed: skipped;
 *   - finished and failed: skipped and reported (its log keeps the reason; the grid exits 1);
 *   - started, not finished (killed, Ctrl-C, lost NATS): resumed with `akbe train --resume`
 *     semantics, from its last published step and with its recorded config;
 *   - absent: started.
 * A run already in the log must have been recorded with the cell's config (a spec edited after
 * its runs started is refused: rename the experiment to run a new grid).
 *
 * Every run connects to the server the runner resolved. When that server is gone (another akbe
 * process's embedded server goes with its process; a killed `akbe nats up`), every later run
 * would fail the same way at once: the grid stops instead, in one line naming the server and the
 * way on. It does not start a server of its own in the lost one's place: workers and viewers of
 * the grid were given the lost URL and would not follow, and a rerun loses nothing (finished
 * runs are skipped, the unfinished one resumes).
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import YAML from 'yaml';
import { NatsConnectError, NatsLostError } from '../../actors/nats/connection.js';
import type { EventStore } from '../../events/store.js';
import type { ExperimentSpec, PlannedRun } from '../../experiments/spec.js';
import { SpecError, settingsForSeed } from '../../experiments/spec.js';
import { Progress } from '../../util/progress.js';
import { ConfigFileError, type JobConfig, parseJobConfig, runTrainJob } from './train-job.js';

export interface RunState {
  status: 'new' | 'unfinished' | 'completed' | 'failed';
  config: Record<string, unknown> | null;
  /** Steps with a published policy (what a resume continues after). */
  stepsDone: number;
}

export async function runStateOf(store: EventStore, runId: string): Promise<RunState> {
  let config: Record<string, unknown> | null = null;
  for await (const { event } of store.replayType(runId, 'run.started')) {
    config = event.data.config;
    break;
  }
  if (!config) return { status: 'new', config, stepsDone: 0 };
  let status: RunState['status'] = 'unfinished';
  // A run that finished otherwise than completed (failed, aborted) cannot be resumed.
  for await (const { event } of store.replayType(runId, 'run.finished'))
    status = event.data.status === 'completed' ? 'completed' : 'failed';
  let stepsDone = 0;
  for await (const { event } of store.replayType(runId, 'policy.published'))
    stepsDone = Math.max(stepsDone, event.data.version);
  return { status, config, stepsDone };
}

/** The cell's job config for one seed: base file, spec settings, the entry's, the seed. */
export async function jobConfigOf(spec: ExperimentSpec, run: PlannedRun): Promise<JobConfig> {
  let base: Record<string, unknown> = {};
  if (spec.base) {
    let text: string;
    try {
      text = await readFile(spec.base, 'utf8');
    } catch (err) {
      throw new SpecError(
        spec.file,
        'base',
        `cannot read ${spec.base} (${(err as NodeJS.ErrnoException).code})`,
        { cause: err },
      );
    }
    try {
      base = (spec.base.endsWith('.json') ? JSON.parse(text) : YAML.parse(text)) ?? {};
    } catch (err) {
      throw new SpecError(
        spec.file,
        'base',
        `${spec.base} is not valid: ${(err as Error).message.split('\n')[0]}`,
        { cause: err },
      );
    }
  }
  const { label: _label, ...settings } = run.cell.settings;
  const merged = { ...base, ...spec.over, ...settingsForSeed(settings, run.seed), seed: run.seed };
  try {
    return await parseJobConfig(JSON.stringify(merged), `${spec.file}.json`);
  } catch (err) {
    if (!(err instanceof ConfigFileError)) throw err;
    const key = err.key;
    const where =
      key in settings
        ? `grid[${run.cell.entry}].${key}`
        : (spec.overFrom[key] ?? (spec.base ? `base (${spec.base}) ${key}` : key));
    const detail = err.message.slice(`${spec.file}.json: `.length);
    throw new SpecError(spec.file, where, detail, { cause: err });
  }
}

/** Keys of the recorded config that differ from the cell's (maxResponseTokens may be cut at setup). */
export function configDrift(recorded: Record<string, unknown>, job: JobConfig): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(job.train)) {
    if (k === 'maxResponseTokens' || !(k in recorded)) continue;
    if (JSON.stringify(recorded[k]) !== JSON.stringify(v))
      out.push(`${k} ${JSON.stringify(recorded[k])} (the spec now says ${JSON.stringify(v)})`);
  }
  return out;
}

export interface GridOptions {
  spec: ExperimentSpec;
  runs: PlannedRun[];
  store: EventStore;
  natsUrl: string;
  /** Whose server `natsUrl` is when not the runner's or a shared one (said when it is lost). */
  natsOwner?: string;
  home: string;
  concurrency: number;
  threads: number;
  device: 'cpu' | 'webgpu' | 'cuda' | 'auto';
  err: NodeJS.WritableStream & { isTTY?: boolean };
}

/** Why the grid's server is unusable, when `err` says so (every later run would fail alike). */
function natsGone(err: unknown): string | null {
  if (err instanceof NatsLostError) return err.detail;
  if (err instanceof NatsConnectError) return (err.cause as Error | undefined)?.message ?? 'cannot connect';
  return null;
}

/** Throws when a run of the grid was recorded with another config than its cell's now. */
function refuseDrift(
  o: GridOptions,
  jobs: ReadonlyArray<Awaited<ReturnType<typeof jobConfigOf>>>,
  states: ReadonlyArray<Awaited<ReturnType<typeof runStateOf>>>,
): void {
  o.runs.forEach((r, i) => {
    const recorded = states[i].config;
    const drift = recorded ? configDrift(recorded, jobs[i]) : [];
    if (drift.length)
      throw new SpecError(
        o.spec.file,
        `grid[${r.cell.entry}]`,
        `run ${r.runId} was recorded with ${drift.join(', ')}; rename the experiment (name:) to run a changed grid`,
      );
  });
}

/**
 * Runs the grid in order; returns the number of runs not completed: failed (now or before), or
 * not run because the NATS server was lost.
 */
export async function runGrid(o: GridOptions): Promise<number> {
  const jobs = await Promise.all(o.runs.map((r) => jobConfigOf(o.spec, r)));
  const states = await Promise.all(o.runs.map((r) => runStateOf(o.store, r.runId)));
  refuseDrift(o, jobs, states);
  const total = jobs.reduce((a, j) => a + j.train.steps, 0);
  const logDir = join(o.home, 'experiments', o.spec.name, 'logs');
  mkdirSync(logDir, { recursive: true });
  const bar = new Progress(`experiment ${o.spec.name}`, {
    total,
    stream: o.err,
    intervalMs: o.err.isTTY ? 100 : 10_000,
  });
  const line = (s: string) => o.err.write(`${o.err.isTTY ? '\r\x1b[K' : ''}experiment: ${s}\n`);
  let failed = 0;
  const done = states.filter((s) => s.status === 'completed').length;
  if (done) line(`${done} of ${o.runs.length} runs already finished; skipping them`);
  for (const [i, r] of o.runs.entries()) {
    const state = states[i];
    const steps = jobs[i].train.steps;
    if (state.status === 'completed') {
      bar.tick(steps);
      continue;
    }
    if (state.status === 'failed') {
      line(`run ${r.runId} failed before (see akbe events tail --run ${r.runId}); skipping it`);
      failed++;
      bar.tick(steps);
      continue;
    }
    const resume = state.status === 'unfinished';
    const logFile = join(logDir, `${r.runId}.log`);
    line(
      `${resume ? `resuming ${r.runId} after step ${state.stepsDone - 1}` : `starting ${r.runId}`} (${r.cell.label}, seed ${r.seed}; log ${logFile})`,
    );
    bar.tick(resume ? state.stepsDone : 0);
    const log = createWriteStream(logFile, { flags: 'a' });
    try {
      await runTrainJob({
        job: jobs[i],
        runId: r.runId,
        resume,
        nats: o.natsUrl,
        home: o.home,
        concurrency: o.concurrency,
        threads: o.threads,
        device: o.device,
        out: log,
        err: log,
        quiet: true,
        onStep: () => bar.tick(),
      });
    } catch (err) {
      const gone = natsGone(err);
      if (gone !== null) {
        const left = o.runs.length - i;
        failed += left;
        line(
          `stopped at ${r.runId}: lost the NATS server at ${o.natsUrl} (${gone})${o.natsOwner ? `, ${o.natsOwner}` : ''}; ` +
            'use akbe nats up for a server that several akbe processes share (an embedded one stops with the process that started it), ' +
            `then run this command again: finished runs are skipped, unfinished ones resume (${left} of ${o.runs.length} runs left; log ${logFile})`,
        );
        break;
      }
      failed++;
      line(`run ${r.runId} failed: ${(err as Error).message.split('\n')[0]} (log ${logFile})`);
    } finally {
      await new Promise((res) => log.end(res));
    }
  }
  bar.finish();
  return failed;
}
