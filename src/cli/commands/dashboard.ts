/**
 * `akbe dashboard`: the web view of runs, questions, live actors and experiments
 * (docs/dashboard.md), served by this process from the bundle `npm run build` ships, reading
 * NATS read-only. Runs until Ctrl-C.
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { join } from 'node:path';
import { type CommandSpec, intFlag, UsageError } from '../command.js';
import { ALLOW_HOST_FLAG, CONNECTION_FLAGS } from '../common-flags.js';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

const dashboard: CommandSpec = {
  path: ['dashboard'],
  summary:
    'serve the web dashboard (runs, per-step charts, questions, live actors, experiments) on 127.0.0.1',
  flags: {
    port: { type: 'string', value: 'P', description: 'port (0 = any free port)', default: '8090' },
    host: {
      type: 'string',
      value: 'H',
      description: 'interface to bind (anything but loopback exposes your runs to the network)',
      default: '127.0.0.1',
    },
    'allow-host': ALLOW_HOST_FLAG,
    inspect: {
      type: 'string',
      value: 'URL',
      multiple: true,
      description:
        'inspector relay(s) to read the live actor tree from (default ws://127.0.0.1:8080, akbe train --inspect)',
    },
    experiments: {
      type: 'string',
      value: 'DIR',
      description: 'where akbe experiment report writes (default <home>/experiments)',
    },
    ...CONNECTION_FLAGS,
  },
  async run(ctx) {
    const port = intFlag(ctx, 'port', { min: 0, max: 65535 })!;
    const host = String(ctx.flags.host);
    const relays = (ctx.flags.inspect as string[] | undefined) ?? ['ws://127.0.0.1:8080'];
    for (const url of relays)
      if (!/^wss?:\/\/[^/]+/.test(url)) throw new UsageError(`--inspect must be a ws:// URL, got '${url}'`);
    const { akbeHome } = await import('../../actors/nats/connection.js');
    const home = (ctx.flags.home as string | undefined) ?? akbeHome();
    const { openDashboardSource } = await import('../../actors/inspect/dashboard-source.js');
    const { ActorsFeed } = await import('../../dashboard/actors-feed.js');
    const { startDashboard } = await import('../../dashboard/server.js');
    const { defaultAssetsDir } = await import('../../dashboard/bundle.js');
    const source = await openDashboardSource({ url: ctx.flags.nats as string | undefined, home });
    const actors = new ActorsFeed(relays);
    try {
      const server = await startDashboard({
        source,
        actors,
        assetsDir: defaultAssetsDir(),
        experimentsDir: (ctx.flags.experiments as string | undefined) ?? join(home, 'experiments'),
        runsDir: join(home, 'runs'),
        port,
        host,
        allowHosts: ctx.flags['allow-host'] as string[] | undefined,
      });
      if (!LOOPBACK.has(host))
        ctx.err.write(
          `akbe dashboard: bound to ${host}: anyone who can reach this port can read your runs\n`,
        );
      ctx.err.write(
        `akbe dashboard: open ${server.url} (NATS ${source.status.url}, read-only; Ctrl-C stops)\n`,
      );
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await server.close();
    } finally {
      actors.close();
      await source.close();
    }
    return 0;
  },
};

export const dashboardCommands: CommandSpec[] = [dashboard];
