/**
 * `akbe replay --run ID`: audit a run from its event log alone (exit 1 on any mismatch);
 * `--question Q`: that question's boundary history across steps;
 * `--inspect`: re-play the run's machines to the Stately inspector (docs/inspector.md).
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { join } from 'node:path';
import type { RunLog } from '../../audit/run-log.js';
import type { AkbeEvent } from '../../events/catalog.js';
import { type CommandContext, type CommandSpec, intFlag, UsageError } from '../command.js';
import { CONNECTION_FLAGS, runFlag } from '../common-flags.js';

/**
 * Opens the event store for one command (dead-lettered messages are reported on stderr and
 * counted); the caller closes `nats`.
 */
export async function openEventStore(ctx: CommandContext) {
  const { connectAkbeNats } = await import('../../actors/nats/connection.js');
  const { EventStore } = await import('../../events/store.js');
  const nats = await connectAkbeNats({
    url: ctx.flags.nats as string | undefined,
    home: ctx.flags.home as string | undefined,
  });
  let deadLettered = 0;
  try {
    const store = await EventStore.open(nats.nc, {
      onDeadLetter: (r) => {
        deadLettered++;
        ctx.err.write(
          `akbe: dead-lettered seq ${r.origin?.seq ?? '?'} on ${r.originalSubject}: ${r.reason}: ${r.detail}\n`,
        );
      },
    });
    return { nats, store, deadLettered: () => deadLettered };
  } catch (err) {
    await nats.close();
    throw err;
  }
}

async function eventsFromStore(ctx: CommandContext, runId: string): Promise<AkbeEvent[]> {
  const { nats, store } = await openEventStore(ctx);
  const events: AkbeEvent[] = [];
  try {
    for await (const { event } of store.replay(runId)) events.push(event);
  } finally {
    await nats.close();
  }
  if (events.length === 0)
    throw new Error(`run ${runId} has no events in the event store (list runs with: akbe runs)`);
  return events;
}

async function eventsFromFile(file: string, runId: string | undefined): Promise<AkbeEvent[]> {
  const { readExportFile } = await import('../../audit/jsonl.js');
  const all = await readExportFile(file);
  const runs = [...new Set(all.map((e) => e.meta.runId))];
  if (runId === undefined && runs.length > 1)
    throw new UsageError(
      `--file ${file} holds ${runs.length} runs (${runs.join(', ')}): pick one with --run`,
    );
  const events = runId === undefined ? all : all.filter((e) => e.meta.runId === runId);
  if (events.length === 0)
    throw new Error(
      `--file ${file} has no events${runId ? ` of run ${runId}` : ''} (write one with: akbe events export --run ID --out ${file})`,
    );
  return events;
}

/** Checks an export's hash chain and signature before anything in it is believed. */
async function verifySeal(ctx: CommandContext, file: string): Promise<void> {
  const { verifyExportFile } = await import('../../audit/export-seal.js');
  const { parseEventJson } = await import('../../audit/jsonl.js');
  const signer = ctx.flags.signer as string | undefined;
  if (signer !== undefined && !/^U[A-Z2-7]{55}$/.test(signer))
    throw new UsageError(
      `--signer must be a user public nkey (U followed by 55 characters), got '${signer}'`,
    );
  const { seal } = await verifyExportFile(file, parseEventJson, signer);
  ctx.err.write(
    `akbe replay: export seal ok: ${seal.events} events of run ${seal.runId} chained and signed by ${seal.signer}${signer ? ' (the expected signer)' : ' (pass --signer KEY to require this orchestrator)'}${seal.finished ? '' : '; the export has no run.finished'}\n`,
  );
}

/**
 * Logs written without `rollout.completed.segments`: rebuild the turn texts from the token ids
 * with the run's world tokenizer (config.worldDir), when it is still on this machine.
 */
async function decodeMissingTexts(ctx: CommandContext, log: RunLog): Promise<void> {
  const missing = [...log.steps.values()].some((s) =>
    [...s.questions.values()].some((q) =>
      [...q.rollouts.values()].some((r) => r.completed && !r.completed.data.segments),
    ),
  );
  const { configOf } = await import('../../audit/recompute.js');
  const worldDir = configOf(log.started).worldDir;
  if (!missing || typeof worldDir !== 'string') return;
  const { readWorldTokenizer } = await import('../../world/files.js');
  const { fillSegments } = await import('../../audit/segments.js');
  let tok: Awaited<ReturnType<typeof readWorldTokenizer>>;
  try {
    tok = await readWorldTokenizer(worldDir);
  } catch (err) {
    ctx.err.write(
      `akbe replay: turn texts not recorded and the run's tokenizer is unreadable (${(err as Error).message}); format not re-checked\n`,
    );
    return;
  }
  const n = fillSegments(log, (ids) => tok.decode(ids));
  ctx.err.write(
    `akbe replay: turn texts of ${n} rollouts decoded from their token ids with ${worldDir}/tokenizer.json (not recorded in the log)\n`,
  );
}

/**
 * The run's turn decoding (its text environment, from the base policy and world it names), so a
 * re-play derives each tool call's token span from the tokens; undefined, with a line saying so,
 * when they are not readable on this machine (spans are then taken as recorded).
 */
async function runTurnText(
  ctx: CommandContext,
  log: RunLog,
): Promise<((ids: readonly number[], turn: number) => string) | undefined> {
  const { configOf } = await import('../../audit/recompute.js');
  const cfg = configOf(log.started);
  const { loadEnvironment } = await import('../../text/environment.js');
  const { readWorldTokenizer } = await import('../../world/files.js');
  try {
    if (typeof cfg.basePolicy !== 'string' || typeof cfg.worldDir !== 'string')
      throw new Error('run.started names no basePolicy and worldDir');
    const worldDir = cfg.worldDir;
    const env = await loadEnvironment(cfg.basePolicy, () => readWorldTokenizer(worldDir));
    return env.turnText;
  } catch (err) {
    ctx.err.write(
      `akbe replay: the run's tokenizer is unreadable (${(err as Error).message}); tool-call spans taken as recorded, not re-derived\n`,
    );
    return undefined;
  }
}

/** How long the relay stays up after the re-play: --inspect-hold, else until Ctrl-C (0 when CI). */
function holdSeconds(ctx: CommandContext): number | 'interrupt' {
  const s = intFlag(ctx, 'inspect-hold', { min: 0 });
  if (s !== undefined) return s;
  return process.env.CI ? 0 : 'interrupt';
}

function hold(seconds: number | 'interrupt'): Promise<void> {
  if (seconds === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      process.off('SIGINT', done);
      resolve();
    };
    const timer = seconds === 'interrupt' ? undefined : setTimeout(done, seconds * 1000);
    process.once('SIGINT', done);
  });
}

/**
 * The audit of the run's log (and, with --verify-training, its re-training), printed as text or
 * one JSON object; true when it passed.
 */
async function auditLog(
  ctx: CommandContext,
  log: RunLog,
  o: { verify: boolean; fromFile: boolean },
): Promise<boolean> {
  // The run's plugins (sha256-checked) before the audit reads its algorithm from the registry.
  const { loadRecordedPlugins } = await import('../../plugins/plugins.js');
  const plugins = await loadRecordedPlugins(log.started?.data.config.plugins);
  if (plugins.length)
    ctx.err.write(`akbe replay: loaded the run's plugins: ${plugins.map((p) => p.path).join(', ')}\n`);
  const { auditPassed, auditRunLog } = await import('../../audit/audit.js');
  const { formatAuditReport } = await import('../../audit/report-format.js');
  // The run's checkpoints, where this machine has them (akbe train's run dir under home).
  const { akbeHome } = await import('../../actors/nats/server-record.js');
  const home = (ctx.flags.home as string | undefined) ?? akbeHome();
  const report = auditRunLog(log, {
    ...(log.runId ? { checkpointsDir: join(home, 'runs', log.runId, 'checkpoints') } : {}),
    keepRequests: o.verify,
  });
  let passed = auditPassed(report);
  const { requests: _kept, ...printed } = report;
  if (!ctx.flags.json) ctx.out.write(formatAuditReport(report));
  let verdict: unknown;
  if (o.verify) {
    const { verifyRunTraining, formatVerdict } = await import('./replay-verify.js');
    const v = await verifyRunTraining(ctx, log, report, { home, fromFile: o.fromFile });
    if (!ctx.flags.json) ctx.out.write(formatVerdict(v));
    passed &&= v.ok;
    verdict = v;
  }
  if (ctx.flags.json)
    ctx.out.write(`${JSON.stringify(o.verify ? { ...printed, verifyTraining: verdict } : printed)}\n`);
  return passed;
}

/** `--inspect`: the run's machines re-played to the Stately inspector; true when identical to the log. */
async function inspectReplay(
  ctx: CommandContext,
  log: RunLog,
  port: number,
  holdFor: number | 'interrupt',
): Promise<boolean> {
  const { startInspector } = await import('../../actors/inspect/inspect.js');
  const { replayRun } = await import('../../actors/inspect/inspect-replay.js');
  const turnText = await runTurnText(ctx, log);
  await using insp = await startInspector({ port, open: !process.env.CI });
  ctx.err.write(
    `inspector: open ${insp.url} (the Stately inspector, fed by the relay at ${insp.wsUrl}; docs/inspector.md)\n`,
  );
  const r = await replayRun(log, { inspect: insp.inspect, turnText });
  for (const d of r.divergences) ctx.out.write(`DIVERGENCE seq ${d.seq}: ${d.what}\n`);
  ctx.err.write(
    `inspector: re-played ${r.steps} steps (${r.facts} facts, ${insp.sent} inspection events)${r.divergences.length ? `, ${r.divergences.length} divergences` : ', identical to the log'}\n`,
  );
  if (holdFor !== 0)
    ctx.err.write(
      `inspector: relay up at ${insp.url}${holdFor === 'interrupt' ? ' until Ctrl-C' : ` for ${holdFor} s`}\n`,
    );
  await hold(holdFor);
  return r.divergences.length === 0;
}

const replay: CommandSpec = {
  path: ['replay'],
  summary:
    "audit a run from its event log (rewards, labels, targets, advantages, metrics recomputed; exit 1 on any mismatch, missing event or missing run.finished), show a question's boundary history, or re-play the run to the Stately inspector",
  flags: {
    run: {
      type: 'string',
      value: 'ID',
      description: 'run id (required unless --file holds one run; see akbe runs)',
    },
    file: {
      type: 'string',
      value: 'FILE',
      description: 'read the run from an `akbe events export` JSONL file instead of NATS',
    },
    question: {
      type: 'string',
      value: 'Q',
      description: "print this question's boundary history across steps",
    },
    inspect: {
      type: 'boolean',
      description: "re-play the run's machines to the Stately inspector (docs/inspector.md)",
    },
    rerun: {
      type: 'boolean',
      description:
        "re-run the run's machines from the log and compare every fact (what --inspect does, without the inspector); exit 1 on a divergence",
    },
    'inspect-port': {
      type: 'string',
      value: 'P',
      description: 'inspector relay port (0 = any free port)',
      default: '8080',
    },
    'inspect-hold': {
      type: 'string',
      value: 'S',
      description: 'seconds the relay stays up after the re-play (default: until Ctrl-C; 0 when CI is set)',
    },
    'verify-training': {
      type: 'boolean',
      description:
        "re-train every step from v0 on the train requests rebuilt from the log and compare each result with its policy.published, file by file (exit 1 naming the first step that differs); costs the run's training time",
    },
    base: {
      type: 'string',
      value: 'DIR',
      description:
        "with --verify-training: the run's base policy directory (v0, checked against run.started's sha256); needed with --file unless the run's own v0 is under the home",
    },
    json: { type: 'boolean', description: 'print the audit report as one JSON object' },
    signer: {
      type: 'string',
      value: 'KEY',
      description: "with --file: the orchestrator's public nkey (U...) the export must be signed by",
    },
    unsigned: {
      type: 'boolean',
      description: 'with --file: audit an export without a seal (not tamper-evident)',
    },
    ...CONNECTION_FLAGS,
  },
  async run(ctx) {
    const file = ctx.flags.file as string | undefined;
    const runId = file && ctx.flags.run === undefined ? undefined : await runFlag(ctx);
    const question = ctx.flags.question as string | undefined;
    if (question === '') throw new UsageError('--question needs a question id');
    const inspect = ctx.flags.inspect === true;
    const port = intFlag(ctx, 'inspect-port', { min: 0, max: 65535 })!;
    const holdFor = holdSeconds(ctx);
    if (!inspect && (ctx.flags['inspect-hold'] !== undefined || ctx.flags['inspect-port'] !== '8080'))
      throw new UsageError('--inspect-port and --inspect-hold need --inspect');

    const verify = ctx.flags['verify-training'] === true;
    if (verify && question !== undefined)
      throw new UsageError('--verify-training and --question do not go together');
    if (!verify && ctx.flags.base !== undefined) throw new UsageError('--base needs --verify-training');
    if (!file && (ctx.flags.signer !== undefined || ctx.flags.unsigned))
      throw new UsageError('--signer and --unsigned need --file');
    if (file && !ctx.flags.unsigned) await verifySeal(ctx, file);

    const { foldRunLog } = await import('../../audit/run-log.js');
    const events = file ? await eventsFromFile(file, runId) : await eventsFromStore(ctx, runId!);
    const log = foldRunLog(events);
    await decodeMissingTexts(ctx, log);

    if (question !== undefined) {
      const { boundaryHistory, questionIdsOf } = await import('../../audit/history.js');
      const { formatHistory } = await import('../../audit/report-format.js');
      const rows = boundaryHistory(log, question);
      if (rows.length === 0) {
        const ids = questionIdsOf(log);
        throw new Error(
          `--question ${question} is not in run ${log.runId}; its questions: ${ids.slice(0, 20).join(', ')}${ids.length > 20 ? ', …' : ''}`,
        );
      }
      ctx.out.write(formatHistory(question, rows));
      if (!inspect) return 0;
    }

    let failed =
      question === undefined && !(await auditLog(ctx, log, { verify, fromFile: file !== undefined }));
    if (ctx.flags.rerun === true && !inspect) {
      const { replayRun } = await import('../../actors/inspect/inspect-replay.js');
      const r = await replayRun(log, { turnText: await runTurnText(ctx, log) });
      for (const d of r.divergences) ctx.out.write(`DIVERGENCE seq ${d.seq}: ${d.what}\n`);
      ctx.err.write(
        `akbe replay: re-ran ${r.steps} steps (${r.facts} facts)${r.divergences.length ? `, ${r.divergences.length} divergences` : ', identical to the log'}\n`,
      );
      failed ||= r.divergences.length > 0;
    }

    if (inspect) failed = !(await inspectReplay(ctx, log, port, holdFor)) || failed;
    return failed ? 1 : 0;
  },
};

export const replayCommands: CommandSpec[] = [replay];
