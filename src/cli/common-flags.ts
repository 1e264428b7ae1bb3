/**
 * Flags and flag checks that several commands share, defined once so that their --help text and
 * their usage errors read the same in every command.
 */
import { type CommandContext, requireString, UsageError } from './command.js';

/** `--home DIR`: where akbe keeps its data (the world, the base policy, a recorded nats-server). */
export const HOME_FLAG = {
  type: 'string',
  value: 'DIR',
  description: 'project data dir (default: AKBE_HOME or ./.akbe)',
} as const;

/** `--nats URL --home DIR`: how a command finds (or starts) its NATS server. */
export const CONNECTION_FLAGS = {
  nats: {
    type: 'string',
    value: 'URL',
    description: 'NATS server (default: NATS_URL, then akbe nats up, then an embedded server)',
  },
  home: HOME_FLAG,
} as const;

/**
 * Checks a run id against the event catalog's pattern; a bad one is a usage error naming `flag`,
 * raised before any connection is made (exit 2).
 */
export async function checkRunId(flag: string, runId: string): Promise<string> {
  const { RUN_ID_PATTERN } = await import('../events/catalog.js');
  if (!RUN_ID_PATTERN.test(runId))
    throw new UsageError(`--${flag} must be 1-64 characters from [A-Za-z0-9_-], got '${runId}'`);
  return runId;
}

/** Reads the required `--run ID` flag and validates it (a usage error, exit 2, when bad). */
export async function runFlag(ctx: CommandContext): Promise<string> {
  return checkRunId('run', requireString(ctx, 'run'));
}
