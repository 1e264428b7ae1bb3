/**
 * `akbe runs`: every run in the event store with its status, steps, algorithm, policy version and
 * latest EM/TC/TP (the run-summary projection over run-level events).
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import type { CommandSpec } from '../command.js';
import { CONNECTION_FLAGS } from '../common-flags.js';
import { openEventStore } from './replay.js';

const runs: CommandSpec = {
  path: ['runs'],
  summary: 'list runs with status, steps, algorithm, policy version and latest EM/TC/TP, newest first',
  flags: {
    json: { type: 'boolean', description: 'one JSON object per run (the run-summary projection)' },
    ...CONNECTION_FLAGS,
  },
  async run(ctx) {
    const { listRuns } = await import('../../audit/runs-list.js');
    const { formatRuns } = await import('../../audit/report-format.js');
    const { nats, store } = await openEventStore(ctx);
    try {
      const { runs, undecodable } = await listRuns(store);
      if (ctx.flags.json) for (const r of runs) ctx.out.write(`${JSON.stringify(r)}\n`);
      else ctx.out.write(formatRuns(runs));
      if (undecodable)
        ctx.err.write(`akbe runs: ${undecodable} run-level messages could not be decoded and were skipped\n`);
    } finally {
      await nats.close();
    }
    return 0;
  },
};

export const runsCommands: CommandSpec[] = [runs];
