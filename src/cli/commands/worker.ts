/**
 * `akbe worker --run-id ID --role rollout|policy|search|trainer|all [--concurrency N]`: joins a
 * run's queue groups and work queue on the NATS server of NATS_URL (or --nats), so a cluster is
 * N such processes on M machines pointed at one NATS. The run's settings come from its log
 * (run.started), its checkpoints from the object store. Runs until SIGINT/SIGTERM or the run ends.
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { join } from 'node:path';
import { type CommandSpec, requireString, UsageError } from '../command.js';
import { ENGINE_FLAGS, engineOptions } from '../common-flags.js';
import { SHARED_FLAGS } from './train.js';

const ROLE_CHOICES = ['rollout', 'policy', 'search', 'trainer', 'all'] as const;

const worker: CommandSpec = {
  path: ['worker'],
  summary: 'Serve one run as a cluster worker: rollout | policy | search | trainer | all',
  flags: {
    'run-id': { type: 'string', value: 'ID', description: 'the run to serve (started by akbe train)' },
    role: {
      type: 'string',
      value: 'R',
      description: `${ROLE_CHOICES.join(' | ')} (comma-separated for several)`,
      default: 'all',
    },
    wait: { type: 'string', value: 'S', description: 'seconds to wait for the run to start', default: '60' },
    ...ENGINE_FLAGS,
    ...SHARED_FLAGS,
  },
  async run(ctx) {
    const runId = requireString(ctx, 'run-id');
    const given = String(ctx.flags.role).split(',');
    for (const r of given)
      if (!(ROLE_CHOICES as readonly string[]).includes(r))
        throw new UsageError(`--role must be ${ROLE_CHOICES.join('|')} (comma-separated), got '${r}'`);
    const { ROLES, readRunStart, startRoles } = await import('../../actors/roles/roles.js');
    const roles = given.includes('all') ? [...ROLES] : (given as (typeof ROLES)[number][]);
    const { connectAkbeNats, akbeHome } = await import('../../actors/nats/connection.js');
    const { EventStore } = await import('../../events/store.js');
    const { CheckpointStore } = await import('../../actors/checkpoints/checkpoints.js');
    const { DEFAULT_KEEP_CHECKPOINTS } = await import('../../actors/checkpoints/keep-checkpoints.js');
    const { recordedInLog } = await import('../../actors/checkpoints/checkpoint-records.js');
    const home = (ctx.flags.home as string | undefined) ?? akbeHome();
    await using nats = await connectAkbeNats({
      url: ctx.flags.nats as string | undefined,
      home,
      embedded: false,
      // One role connects as that role's NATS user, with only its subjects; several share the
      // orchestrator's user (they run in one process with one connection).
      role: roles.length === 1 ? roles[0] : 'orchestrator',
    });
    const store = await EventStore.open(nats.nc);
    const { spec, trainSigner } = await readRunStart(store, runId, Number(ctx.flags.wait) * 1000);
    const log = (line: string) => ctx.err.write(`worker: ${line}\n`);
    // Checkpoints fetched from the object store are checked against the sha256 the log recorded.
    const checkpoints = await CheckpointStore.open(
      nats.nc,
      runId,
      join(home, 'worker-cache', runId, `${process.pid}`),
      {
        log,
        recorded: recordedInLog(store, runId, { log }),
        // The cache keeps what the run keeps (the orchestrator prunes the object store).
        cacheKeep: spec.keepCheckpoints ?? DEFAULT_KEEP_CHECKPOINTS,
      },
    );
    // A rollout worker joins the run's queue; only the orchestrator creates it (before run.started).
    const started = await startRoles(nats.nc, nats.js, store, checkpoints, runId, spec, roles, {
      concurrency: Number(ctx.flags.concurrency),
      threads: Number(ctx.flags.threads),
      device: ctx.flags.device as 'cpu',
      engine: await engineOptions(ctx),
      log,
      // A trainer here trains only on requests the run's orchestrator signed (run.started names it).
      trainSigner: roles.includes('trainer') ? trainSigner : undefined,
      // A rollout role keys its message ids with the seed it connected with (events/message-key.ts).
      ...(nats.credentials ? { credentialSeed: nats.credentials.seed } : {}),
    });
    ctx.err.write(`worker ${process.pid}: serving run ${runId} as ${roles.join(', ')} on ${nats.url}\n`);
    await new Promise<void>((resolve) => {
      // Whichever ends the wait clears the others: a status poll left behind kept a worker
      // stopped by SIGTERM alive for good, polling a server that was gone.
      let timer: ReturnType<typeof setInterval> | undefined;
      const done = () => {
        clearInterval(timer);
        process.off('SIGINT', done);
        process.off('SIGTERM', done);
        resolve();
      };
      process.once('SIGINT', done);
      process.once('SIGTERM', done);
      // The run's end: its status in KV becomes completed.
      timer = setInterval(async () => {
        if ((await checkpoints.status().catch(() => null)) === 'completed') done();
      }, 2_000);
    });
    await started.stop();
    const stats = started.rollout?.stats;
    ctx.err.write(
      `worker ${process.pid}: stopped (${stats?.completed ?? 0} rollouts, ${stats?.redelivered ?? 0} redelivered to it)\n`,
    );
    return 0;
  },
};

export const workerCommands: CommandSpec[] = [worker];
