/**
 * `akbe events tail|export|dead-letters`: read a run's event log.
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { type CommandSpec, choiceFlag, intFlag } from '../command.js';
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
    const { nats, store, deadLettered } = await openEventStore(ctx);
    const sink = file ? createWriteStream(file) : ctx.out;
    let n = 0;
    try {
      if (file) await once(sink, 'open');
      for await (const { event } of store.replay(runId)) {
        if (!sink.write(`${eventToJsonLine(event)}\n`)) await once(sink, 'drain');
        n++;
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code && file)
        throw new Error(`--out ${file}: ${(err as Error).message}`, { cause: err });
      throw err;
    } finally {
      if (file) await new Promise<void>((r) => (sink as NodeJS.WritableStream).end(r));
      await nats.close();
    }
    const dl = deadLettered();
    ctx.err.write(
      `exported ${n} events of run ${runId}${file ? ` to ${file}` : ''}${dl ? `; ${dl} bad messages went to the dead letters (akbe events dead-letters --run ${runId})` : ''}\n`,
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

export const eventsCommands: CommandSpec[] = [tail, exportCmd, deadLetters];
