/**
 * `akbe demo` (what `npm start` runs): appends a short synthetic run's events to the event log,
 * replays them and prints one line per event, then the run summary. A placeholder for the real
 * training run, which will replace its body; it shows the backbone working end to end.
 */
import { type CommandSpec, intFlag, UsageError } from '../command.js';

const demo: CommandSpec = {
  path: ['demo'],
  summary: 'append a short synthetic run to the event log, replay it and print its events',
  flags: {
    run: { type: 'string', value: 'ID', description: 'run id (default: demo-<time>)' },
    steps: { type: 'string', value: 'N', description: 'training steps to simulate', default: '2' },
    questions: { type: 'string', value: 'N', description: 'questions per step', default: '2' },
    nats: {
      type: 'string',
      value: 'URL',
      description: 'NATS server (default: NATS_URL, then akbe nats up, then an embedded server)',
    },
    home: { type: 'string', value: 'DIR', description: 'project data dir (default: AKBE_HOME or ./.akbe)' },
  },
  async run(ctx) {
    const steps = intFlag(ctx, 'steps', { min: 1, max: 100 })!;
    const questionsPerStep = intFlag(ctx, 'questions', { min: 1, max: 64 })!;
    const { RUN_ID_PATTERN } = await import('../../events/catalog.js');
    const runId =
      (ctx.flags.run as string | undefined) ??
      `demo-${new Date()
        .toISOString()
        .replace(/[^0-9]/g, '')
        .slice(0, 14)}-${process.pid}`;
    if (!RUN_ID_PATTERN.test(runId))
      throw new UsageError(`--run must be 1-64 characters from [A-Za-z0-9_-], got '${runId}'`);
    const { connectAkbeNats } = await import('../../actors/connection.js');
    const { EventStore } = await import('../../events/store.js');
    const { syntheticRunEvents } = await import('../../events/synthetic.js');
    const { MonotonicClock } = await import('../../events/clock.js');
    const { formatTailLine } = await import('../../events/tail-format.js');
    const { foldRun } = await import('../../events/projection.js');
    const { runSummary } = await import('../../events/projections/run-summary.js');

    await using nats = await connectAkbeNats({
      url: ctx.flags.nats as string | undefined,
      home: ctx.flags.home as string | undefined,
    });
    ctx.err.write(`demo: NATS at ${nats.url} (${nats.source})\n`);
    await using store = await EventStore.open(nats.nc);
    const events = syntheticRunEvents({
      runId,
      steps,
      questionsPerStep,
      withTool: 2,
      noTool: 2,
      clock: new MonotonicClock(),
    });
    const t0 = performance.now();
    await store.appendMany(events);
    ctx.err.write(
      `demo: appended ${events.length} events of run ${runId} in ${(performance.now() - t0).toFixed(0)} ms\n`,
    );
    for await (const { seq, event } of store.replay(runId)) ctx.out.write(`${formatTailLine(event, seq)}\n`);
    const { state } = await foldRun(store, runId, runSummary);
    ctx.out.write(
      `run ${runId}: ${state.status}, algo ${state.algo}, ${state.steps} steps, policy v${state.policyVersion}, ${Object.values(state.counts).reduce((a, b) => a + b, 0)} events\n`,
    );
    ctx.out.write(`export it with: akbe events export --run ${runId} --format jsonl --out ${runId}.jsonl\n`);
    return 0;
  },
};

export const demoCommands: CommandSpec[] = [demo];
