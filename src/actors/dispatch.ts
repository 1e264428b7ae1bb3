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
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { AkbeEvent, EventOf } from '../events/catalog.js';
import { decodeEvent } from '../events/codec.js';
import { readStream } from '../events/stream-reader.js';
import { commandSubject, EVENTS_STREAM, eventSubject } from '../events/subjects.js';
import type { RolloutInput } from '../machines/rollout.js';
import type { RolloutResult, StopReason } from '../rl/types.js';
import { pack } from './wire.js';

export const COMMAND_STREAM = 'AKBE_COMMANDS';
export const COMMAND_SUBJECTS = 'akbe.*.cmd.>';

export interface RolloutCommand {
  runId: string;
  step: number;
  input: RolloutInput;
}

export interface DispatchOptions {
  /** Time a worker has to ack (or send a heartbeat) before the rollout is redelivered. */
  ackWaitMs?: number;
  /** Deliveries of one rollout before it is given up. */
  maxDeliver?: number;
}

const nanos = (ms: number) => ms * 1_000_000;

export function rolloutConsumerName(runId: string): string {
  return `rollout-${runId}`;
}

/** Creates the command stream and the run's rollout consumer when missing. */
export async function ensureRolloutQueue(
  jsm: JetStreamManager,
  runId: string,
  opts: DispatchOptions = {},
): Promise<void> {
  try {
    await jsm.streams.info(COMMAND_STREAM);
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== 10059) throw err;
    try {
      await jsm.streams.add({
        name: COMMAND_STREAM,
        subjects: [COMMAND_SUBJECTS],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: nanos(120_000),
      });
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
    await jsm.consumers.info(COMMAND_STREAM, durable);
    // Only the orchestrator sets the timing; a joining worker leaves it as it is.
    if (opts.ackWaitMs !== undefined || opts.maxDeliver !== undefined)
      await jsm.consumers.update(COMMAND_STREAM, durable, {
        ack_wait: config.ack_wait,
        max_deliver: config.max_deliver,
      });
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== 10014) throw err;
    await jsm.consumers.add(COMMAND_STREAM, config);
  }
}

/** Drops the run's undelivered and unacked commands (a resumed orchestrator re-dispatches). */
export async function purgeRolloutCommands(jsm: JetStreamManager, runId: string): Promise<number> {
  const r = await jsm.streams.purge(COMMAND_STREAM, { filter: commandSubject(runId, 'rollout') });
  return r.purged;
}

/**
 * `epoch` names the orchestrator instance: a resumed orchestrator re-dispatches what its crashed
 * predecessor's purged commands held, and must not be swallowed by their dedupe ids.
 */
export async function dispatchRollout(js: JetStreamClient, cmd: RolloutCommand, epoch = 0): Promise<void> {
  await js.publish(commandSubject(cmd.runId, 'rollout'), pack(cmd), {
    msgID: `${cmd.runId}:${cmd.input.rolloutId}:${epoch}`,
  });
}

const STOP_OF_FINISH: Record<string, StopReason> = {
  answer: 'answer',
  'max-tokens': 'length',
  'max-turns': 'tool-limit',
  'format-error': 'invalid-action',
};

/** The learner's view of a stored rollout (text segments and turn counts are not in the log). */
export function rolloutResultOf(e: EventOf<'rollout.completed'>): RolloutResult {
  const d = e.data;
  return {
    questionId: e.meta.questionId,
    rolloutId: e.meta.rolloutId,
    index: d.index,
    path: d.path,
    policyVersion: e.meta.policyVersion,
    seed: d.seed,
    promptTokens: Array.from(d.promptTokenIds),
    responseTokens: Array.from(d.responseTokenIds),
    responseLogprobs: Array.from(d.oldLogprobs),
    responseMask: Array.from(d.lossMask),
    segments: [],
    answer: d.answer,
    toolCalls: d.toolCalls,
    turns: 0,
    formatOk: d.formatOk,
    formatReason: d.formatOk ? 'ok' : d.finishReason,
    stopReason: STOP_OF_FINISH[d.finishReason] ?? 'invalid-action',
    em: d.formatOk && d.reward > 0 ? 1 : 0,
    reward: d.reward,
  };
}

/** Resolves rollout ids from the log's `rollout.completed` events, each once. */
export class CompletionWatcher implements AsyncDisposable {
  private readonly done = new Map<string, RolloutResult>();
  private readonly waiting = new Map<string, Array<(r: RolloutResult) => void>>();
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;
  /** Completions read from the log (duplicates included: they are counted once in `done`). */
  events = 0;

  constructor(
    private readonly js: JetStreamClient,
    readonly runId: string,
  ) {}

  /** Reads what is already stored, then follows new completions. */
  async start(onError: (err: Error) => void): Promise<void> {
    const subject = eventSubject(this.runId, 'rollout.completed');
    let last = 0;
    for await (const m of readStream(this.js, EVENTS_STREAM, subject)) {
      this.accept(m.data);
      last = m.seq;
    }
    this.loop = (async () => {
      try {
        for await (const m of readStream(this.js, EVENTS_STREAM, subject, {
          follow: true,
          fromSeq: last + 1,
          signal: this.abort.signal,
        }))
          this.accept(m.data);
      } catch (err) {
        if (!this.abort.signal.aborted) onError(err as Error);
      }
    })();
  }

  private accept(bytes: Uint8Array): void {
    let event: AkbeEvent;
    try {
      event = decodeEvent(bytes);
    } catch {
      return; // the store's readers dead-letter bad messages; the watcher only needs good ones
    }
    if (event.type !== 'rollout.completed') return;
    this.events++;
    const id = event.meta.rolloutId;
    if (this.done.has(id)) return;
    const result = rolloutResultOf(event);
    this.done.set(id, result);
    for (const resolve of this.waiting.get(id) ?? []) resolve(result);
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
    return new Promise((resolve) => {
      const list = this.waiting.get(rolloutId) ?? [];
      list.push(resolve);
      this.waiting.set(rolloutId, list);
    });
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
