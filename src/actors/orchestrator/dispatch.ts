/**
 * Rollout dispatch that survives process loss.
 *
 * Commands: one JetStream message per rollout on `akbe.<run>.cmd.rollout`, in the work-queue
 * stream AKBE_COMMANDS (a message is removed once acked). All rollout workers of a run pull from
 * one durable consumer `rollout-<run>` (explicit ack, ack wait, max deliver): a worker acks a
 * rollout only after its `rollout.completed` event is stored; a worker that dies stops sending
 * progress heartbeats, so its rollout is redelivered to another worker after the ack wait.
 * The command's Nats-Msg-Id is `<run>:<rolloutId>:<epoch>` (a re-dispatch by the same orchestrator
 * within the duplicate window is stored once; a resumed orchestrator has a new epoch).
 *
 * Completions: the orchestrator does not trust replies, it reads the log. A `CompletionWatcher`
 * follows `akbe.<run>.evt.rollout.completed` and resolves each rollout id once, from its first
 * stored event; the event's dedupe id is derived from (run, step, rollout id), so a redelivered
 * rollout whose first worker died after appending is stored, and counted, once.
 *
 * nats-server 2.9: one filter subject per consumer (a string), no per-message TTL.
 */
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { rolloutResultOf } from '../../audit/rollout-result.js';
import type { AkbeEvent } from '../../events/catalog.js';
import { decodeStoredEvent } from '../../events/codec.js';
import { type EdgeGate, EdgeRejectedError } from '../../events/edge-gate.js';
import { InvalidEventError } from '../../events/errors.js';
import { connectionOf, delay, ELECTION_RETRY_MS, retryElection } from '../../events/retry.js';
import { readStream } from '../../events/stream-reader.js';
import {
  COMMAND_STREAM,
  COMMAND_SUBJECTS,
  commandSubject,
  EVENTS_STREAM,
  eventSubject,
} from '../../events/subjects.js';
import type { RolloutResult } from '../../rl/types.js';
import { pack } from '../nats/wire.js';
import { type RolloutCommand, rolloutConsumerName } from '../rollout/protocol.js';

/** A dispatched rollout, by its command's stream sequence (the max-deliveries advisory names only that). */
export interface DispatchedRollout {
  rolloutId: string;
  step: number;
}

export interface DispatchOptions {
  /** Time a worker has to ack (or send a heartbeat) before the rollout is redelivered. */
  ackWaitMs?: number;
  /** Deliveries of one rollout before it is given up. */
  maxDeliver?: number;
}

const nanos = (ms: number) => ms * 1_000_000;

/** Creates the command stream and the run's rollout consumer when missing. */
export async function ensureRolloutQueue(
  jsm: JetStreamManager,
  runId: string,
  opts: DispatchOptions = {},
  replicas?: number,
): Promise<void> {
  try {
    await retryElection(jsm, `stream info ${COMMAND_STREAM}`, () => jsm.streams.info(COMMAND_STREAM));
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== 10059) throw err;
    try {
      await retryElection(jsm, `create stream ${COMMAND_STREAM}`, () =>
        jsm.streams.add({
          name: COMMAND_STREAM,
          subjects: [COMMAND_SUBJECTS],
          retention: RetentionPolicy.Workqueue,
          storage: StorageType.File,
          // Like the event log: 3 on a cluster, so losing one node loses no command.
          num_replicas: replicas ?? 1,
          duplicate_window: nanos(120_000),
        }),
      );
    } catch (e) {
      if (!(e instanceof JetStreamApiError) || e.code !== 10058) throw e;
    }
  }
  const durable = rolloutConsumerName(runId);
  const config = {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: commandSubject(runId, 'rollout'),
    ack_wait: nanos(opts.ackWaitMs ?? 30_000),
    max_deliver: opts.maxDeliver ?? 5,
    max_ack_pending: 4096,
  };
  try {
    await retryElection(jsm, `consumer ${durable}`, () => jsm.consumers.info(COMMAND_STREAM, durable));
    // Only the orchestrator sets the timing; a joining worker leaves it as it is.
    if (opts.ackWaitMs !== undefined || opts.maxDeliver !== undefined)
      await retryElection(jsm, `update consumer ${durable}`, () =>
        jsm.consumers.update(COMMAND_STREAM, durable, {
          ack_wait: config.ack_wait,
          max_deliver: config.max_deliver,
        }),
      );
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== 10014) throw err;
    await retryElection(jsm, `create consumer ${durable}`, () => jsm.consumers.add(COMMAND_STREAM, config));
  }
}

/** Drops the run's undelivered and unacked commands (a resumed orchestrator re-dispatches). */
export async function purgeRolloutCommands(jsm: JetStreamManager, runId: string): Promise<number> {
  const filter = commandSubject(runId, 'rollout');
  const r = await retryElection(jsm, `purge ${filter}`, () => jsm.streams.purge(COMMAND_STREAM, { filter }));
  return r.purged;
}

/**
 * `epoch` names the orchestrator instance: a resumed orchestrator re-dispatches what its crashed
 * predecessor's purged commands held, and must not be swallowed by their dedupe ids.
 */
export async function dispatchRollout(js: JetStreamClient, cmd: RolloutCommand, epoch = 0): Promise<number> {
  const subject = commandSubject(cmd.runId, 'rollout');
  const msgID = `${cmd.runId}:${cmd.input.rolloutId}:${epoch}`;
  // A cluster that lost a node answers nothing (timeouts, no responders) for a few seconds while
  // the command stream elects a leader: ask again (the msgID stores a command sent twice once).
  const ack = await retryElection(js, `dispatch ${cmd.input.rolloutId}`, () =>
    js.publish(subject, pack(cmd), { msgID }),
  );
  return ack.seq;
}

/** Resolves rollout ids from the log's `rollout.completed` events, each once. */
export class CompletionWatcher implements AsyncDisposable {
  private readonly done = new Map<string, RolloutResult>();
  private readonly waiting = new Map<
    string,
    Array<{ resolve: (r: RolloutResult) => void; reject: (e: Error) => void }>
  >();
  private readonly failed = new Map<string, Error>();
  /** Set when the completion stream ended under us (NATS lost): every wait, now or later, fails. */
  private broken: Error | null = null;
  /** When the last completion arrived (or the watcher started): what a stall deadline measures. */
  lastProgressAt = Date.now();
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;
  /** Completions read from the log (duplicates included: they are counted once in `done`). */
  events = 0;

  constructor(
    private readonly js: JetStreamClient,
    readonly runId: string,
    /** Dead-letters what is stored on the completion subject but is no valid completion. */
    private readonly edge?: EdgeGate,
  ) {}

  /** Reads what is already stored, then follows new completions. */
  async start(onError: (err: Error) => void): Promise<void> {
    const subject = eventSubject(this.runId, 'rollout.completed');
    let last = 0;
    for await (const m of readStream(this.js, EVENTS_STREAM, subject)) {
      await this.accept(m);
      last = m.seq;
    }
    // Followed until stopped. A read that ends or fails while the connection is up (a cluster
    // election longer than the reader's own retries) starts again after the last completion
    // seen, so none is missed or counted twice; after ELECTION_RETRY_MS of failures with no
    // completion read, or once the connection is closed (NATS lost), every wait fails: without
    // that, every awaited rollout would wait forever (the stall deadline is minutes away).
    this.loop = (async () => {
      let failingSince = 0;
      for (;;) {
        let cause: Error = new Error('the rollout completion stream ended');
        try {
          for await (const m of readStream(this.js, EVENTS_STREAM, subject, {
            follow: true,
            fromSeq: last + 1,
            signal: this.abort.signal,
          })) {
            await this.accept(m);
            last = m.seq;
            failingSince = 0;
          }
        } catch (err) {
          cause = err as Error;
        }
        if (this.abort.signal.aborted) return;
        failingSince ||= Date.now();
        if (connectionOf(this.js).isClosed() || Date.now() - failingSince > ELECTION_RETRY_MS)
          return this.breakAll(cause, onError);
        if (process.env.AKBE_DEBUG)
          process.stderr.write(
            `akbe debug: completion watcher: ${cause.message}; reading on from seq ${last + 1}\n`,
          );
        await delay(1_000, this.abort.signal);
      }
    })();
  }

  private breakAll(err: Error, onError: (err: Error) => void): void {
    this.broken = err;
    for (const list of this.waiting.values()) for (const w of list) w.reject(err);
    this.waiting.clear();
    onError(err);
  }

  private async accept(m: JsMsg): Promise<void> {
    let event: AkbeEvent;
    try {
      event = decodeStoredEvent(m.subject, m.data);
    } catch (err) {
      // Never trusted, never fatal: kept as a dead letter (the same one a replay would write).
      const reason = err instanceof InvalidEventError ? 'invalid' : 'undecodable';
      const e = new EdgeRejectedError(reason, `rollout.completed: ${(err as Error).message}`, { cause: err });
      await this.edge?.deadLetter(m.subject, m.data, e, { stream: m.info.stream, seq: m.seq });
      return;
    }
    if (event.type !== 'rollout.completed') return;
    this.events++;
    const id = event.meta.rolloutId;
    if (this.done.has(id)) return;
    const result = rolloutResultOf(event);
    this.done.set(id, result);
    this.lastProgressAt = Date.now();
    for (const w of this.waiting.get(id) ?? []) w.resolve(result);
    this.waiting.delete(id);
  }

  has(rolloutId: string): boolean {
    return this.done.has(rolloutId);
  }

  get completed(): number {
    return this.done.size;
  }

  wait(rolloutId: string): Promise<RolloutResult> {
    const r = this.done.get(rolloutId);
    if (r) return Promise.resolve(r);
    const f = this.failed.get(rolloutId);
    if (f) return Promise.reject(f);
    if (this.broken) return Promise.reject(this.broken);
    return new Promise((resolve, reject) => {
      const list = this.waiting.get(rolloutId) ?? [];
      list.push({ resolve, reject });
      this.waiting.set(rolloutId, list);
    });
  }

  /** Rollout ids waited for and not completed. */
  pending(): string[] {
    return [...this.waiting.keys()];
  }

  /** Ends a rollout's waits with `err` (a terminal failure: it will not complete). */
  fail(rolloutId: string, err: Error): void {
    if (this.done.has(rolloutId)) return;
    this.failed.set(rolloutId, err);
    for (const w of this.waiting.get(rolloutId) ?? []) w.reject(err);
    this.waiting.delete(rolloutId);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
