#!/usr/bin/env node
import { isEntryPoint } from '../util/entry.js';
import { type CommandSpec, commandName, helpFor, parseFlags, UsageError } from './command.js';
import { applyNatsTrustFlags } from './common-flags.js';
import { COMMANDS } from './registry.js';

/** Finds the command whose path is the longest prefix of argv. */
export function resolveCommand(argv: string[]): { spec?: CommandSpec; rest: string[]; prefix: string[] } {
  let best: CommandSpec | undefined;
  for (const spec of COMMANDS) {
    if (spec.path.every((p, i) => argv[i] === p) && (!best || spec.path.length > best.path.length))
      best = spec;
  }
  if (best) return { spec: best, rest: argv.slice(best.path.length), prefix: best.path };
  const prefix: string[] = [];
  for (const word of argv) {
    if (word.startsWith('-')) break;
    if (!COMMANDS.some((c) => [...prefix, word].every((p, i) => c.path[i] === p))) break;
    prefix.push(word);
  }
  return { rest: argv.slice(prefix.length), prefix };
}

function overview(prefix: string[]): string {
  const shown = COMMANDS.filter((c) => prefix.every((p, i) => c.path[i] === p));
  const width = Math.max(...shown.map((c) => commandName(c).length), 10);
  const lines = [
    prefix.length ? `usage: akbe ${prefix.join(' ')} <command> [flags]` : 'usage: akbe <command> [flags]',
    '',
    'akbe trains tool-using language-model agents with GRPO + AKBE on an event-sourced actor system.',
    '',
    'commands:',
    ...shown.map((c) => `  ${commandName(c).padEnd(width)}  ${c.summary.split('\n')[0]}`),
    '',
    'Run any command with --help for its flags.',
  ];
  return `${lines.join('\n')}\n`;
}

export async function main(
  argv: string[],
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
): Promise<number> {
  const { spec, rest, prefix } = resolveCommand(argv);
  if (!spec) {
    const word = argv[prefix.length];
    if (word === undefined || word === '--help' || word === '-h' || word === 'help') {
      out.write(overview(prefix));
      return 0;
    }
    err.write(
      `akbe: unknown command '${[...prefix, word].join(' ')}' (see akbe ${prefix.join(' ')}${prefix.length ? ' ' : ''}--help)\n`,
    );
    return 2;
  }
  let restoreEnv = () => {};
  try {
    const { flags, positionals, help } = parseFlags(spec, rest);
    if (help) {
      out.write(helpFor(spec));
      return 0;
    }
    if (flags['nats-ca'] !== undefined && flags['nats-insecure'] === true)
      throw new UsageError('--nats-ca and --nats-insecure contradict each other: give one');
    restoreEnv = applyNatsTrustFlags(flags);
    const code = await spec.run({ flags, positionals, out, err });
    return typeof code === 'number' ? code : 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err.write(`akbe: ${e.message}\n`);
      return 2;
    }
    // Known failures carry a one-line message that names the file or flag and the fix.
    const error = e as Error;
    err.write(`akbe ${spec.path.join(' ')}: ${error.message}\n`);
    if (process.env.AKBE_DEBUG) err.write(`${error.stack}\n`);
    return 1;
  } finally {
    restoreEnv();
  }
}

if (isEntryPoint(import.meta.url)) {
  // Everything akbe writes is the user's alone (checkpoints, worlds, exports, credentials, the
  // NATS store, which its nats-server child inherits this from): files 0600, folders 0700,
  // whatever the shell's umask. Set here, not in main(), so a test calling main() keeps its own.
  process.umask(0o077);
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    // A command that failed mid-way (e.g. NATS lost under a run) can leave handles behind it: a
    // worker thread, a reconnect loop. Its one-line error is written; it must not hang after it.
    // The timer is unref'd, so a process with nothing left open still exits at once.
    if (code !== 0)
      setTimeout(() => {
        if (process.env.AKBE_DEBUG)
          process.stderr.write(
            `akbe: exiting with open resources: ${process.getActiveResourcesInfo().join(', ')}\n`,
          );
        process.exit(code);
      }, 2_000).unref();
  });
}
