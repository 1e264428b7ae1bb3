/**
 * `akbe events tail|export|dead-letters`: read a run's event log.
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { type CommandContext, type CommandSpec, choiceFlag, intFlag } from '../command.js';
import { CONNECTION_FLAGS, runFlag } from '../common-flags.js';
import { openEventStore } from './replay.js';

const tail: CommandSpec = {
  path: ['events', 'tail'],
  summary: "print a run's events, one line each, and follow new ones until run.finished (or Ctrl-C)",
  flags: {
    run: { type: 'string', value: 'ID', description: 'run id (required)' },
    'from-seq': { type: 'string', value: 'N', description: 'start at this stream sequence' },
    once: { type: 'boolean', description: 'print the events stored now and exit' },
    ...CONNECTION_FLAGS,
  },
  async run(ctx) {
    const runId = await runFlag(ctx);
    const fromSeq = intFlag(ctx, 'from-seq', { min: 1 });
    const { formatTailLine } = await import('../../events/tail-format.js');
    const { nats, store } = await openEventStore(ctx);
    const abort = new AbortController();
    const onSigint = () => abort.abort();
    process.once('SIGINT', onSigint);
    try {
      for await (const { seq, event } of store.replay(runId, {
        fromSeq,
        follow: ctx.flags.once !== true,
        signal: abort.signal,
      })) {
        ctx.out.write(`${formatTailLine(event, seq)}\n`);
        if (event.type === 'run.finished') break;
      }
    } finally {
      process.off('SIGINT', onSigint);
      await nats.close();
    }
    return 0;
  },
};

const exportCmd: CommandSpec = {
  path: ['events', 'export'],
  summary:
    'write every event of a run as JSON lines (typed arrays as number arrays, meta.seq = stream sequence)',
  flags: {
    run: { type: 'string', value: 'ID', description: 'run id (required)' },
    format: { type: 'string', value: 'FORMAT', description: 'output format: jsonl', default: 'jsonl' },
    out: { type: 'string', value: 'FILE', description: 'output file (default: stdout)' },
    ...CONNECTION_FLAGS,
  },
  async run(ctx) {
    const runId = await runFlag(ctx);
    choiceFlag(ctx, 'format', ['jsonl'] as const, 'jsonl');
    const file = ctx.flags.out as string | undefined;
    const { eventToJsonLine } = await import('../../events/codec.js');
    const { ExportChain, sealLine } = await import('../../audit/export-seal.js');
    const { nats, store, deadLettered } = await openEventStore(ctx);
    const seed = await exportSigningSeed(ctx, nats.url);
    const sink = file ? createWriteStream(file) : ctx.out;
    const chain = new ExportChain(runId);
    let n = 0;
    try {
      if (file) await once(sink, 'open');
      for await (const { event } of store.replay(runId)) {
        const line = eventToJsonLine(event);
        chain.add(line, event);
        if (!sink.write(`${line}\n`)) await once(sink, 'drain');
        n++;
      }
      // The seal: hash chain head + the run's digest, signed with the orchestrator's nkey.
      if (seed) sink.write(`${sealLine(chain, seed)}\n`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code && file)
        throw new Error(`--out ${file}: ${(err as Error).message}`, { cause: err });
      throw err;
    } finally {
      if (file) await new Promise<void>((r) => (sink as NodeJS.WritableStream).end(r));
      await nats.close();
    }
    const dl = deadLettered();
    // A run whose every message was dead-lettered exists (the export says where they went);
    // one with nothing on its subjects does not.
    if (n === 0 && dl === 0) {
      if (file) await rm(file, { force: true });
      throw new Error(
        `run ${runId} has no events on ${nats.url}: nothing exported (akbe runs lists the runs)`,
      );
    }
    if (!seed)
      ctx.err.write(
        'akbe events export: no orchestrator key (akbe nats auth, or AKBE_NATS_CREDS): the export is not sealed\n',
      );
    ctx.err.write(
      `exported ${n} events of run ${runId}${file ? ` to ${file}` : ''}${dl ? `; ${dl} bad messages went to the dead letters (akbe events dead-letters --run ${runId})` : ''}${seed ? `; sealed by ${seed.signer}` : ''}\n`,
    );
    return 0;
  },
};

const deadLetters: CommandSpec = {
  path: ['events', 'dead-letters'],
  summary: 'list dead letters (messages that could not be decoded, validated or handled), with their reasons',
  flags: {
    run: { type: 'string', value: 'ID', description: 'only this run (default: all runs)' },
    json: { type: 'boolean', description: 'JSON lines with the original bytes in base64' },
    ...CONNECTION_FLAGS,
  },
  async run(ctx) {
    const runId = ctx.flags.run === undefined ? undefined : await runFlag(ctx);
    const { nats, store } = await openEventStore(ctx);
    let n = 0;
    try {
      for await (const d of store.deadLetters(runId)) {
        n++;
        if (ctx.flags.json) {
          const { bytes, ...rest } = d;
          ctx.out.write(`${JSON.stringify({ ...rest, bytes: Buffer.from(bytes).toString('base64') })}\n`);
        } else {
          const when = new Date(d.storedAt).toISOString().slice(0, 23);
          const origin = d.origin ? ` ${d.origin.stream}#${d.origin.seq}` : '';
          ctx.out.write(
            `#${d.seq}  ${when}  ${d.reason.padEnd(19)} ${d.originalSubject}${origin}  ${d.bytes.length} B  by ${d.detectedBy}: ${d.detail}\n`,
          );
        }
      }
    } finally {
      await nats.close();
    }
    if (n === 0 && !ctx.flags.json) ctx.out.write(`no dead letters${runId ? ` for run ${runId}` : ''}\n`);
    return 0;
  },
};

/** The orchestrator's nkey seed, found the way the connection finds credentials. */
async function exportSigningSeed(
  ctx: CommandContext,
  url: string,
): Promise<(Uint8Array & { signer: string }) | null> {
  const { akbeHome, natsClientOptions } = await import('../../actors/nats/connection.js');
  const { readSeed } = await import('../../actors/nats/nats-auth.js');
  const creds = natsClientOptions(
    (ctx.flags.home as string | undefined) ?? akbeHome(),
    'orchestrator',
    process.env,
    url,
  ).credentials;
  if (!creds) return null;
  return Object.assign(creds.seed, { signer: readSeed(creds.path).getPublicKey() });
}

export const eventsCommands: CommandSpec[] = [tail, exportCmd, deadLetters];
