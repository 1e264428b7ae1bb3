/**
 * A rollout worker: pulls rollout commands of one run from the work queue (dispatch.ts), runs the
 * rollout machine for each with its `generate` and `search` actors calling the policy and search
 * services over NATS, appends the machine's facts to the event log, and acks the command only
 * once `rollout.completed` is stored. While a rollout runs the worker sends progress heartbeats
 * (`working`), so only a dead worker's rollouts are redelivered. Up to `concurrency` rollouts run
 * at once (their generate calls meet in the policy service's batcher).
 *
 * Text conventions are the world's (src/world/eval.ts): a turn after the first and every
 * observation are joined with a leading space; the observation is the world's `<information>`
 * block of the top-k passages, tokenized with the world tokenizer (token-in/token-out: its ids are
 * what the trajectory keeps).
 */
import type { ConsumerMessages, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type AnyActorRef, createActor, fromPromise, type InspectionEvent, toPromise } from 'xstate';
import type { EventStore } from '../events/store.js';
import { requestSearch } from '../index/service.js';
import type { AkbeFact } from '../machines/facts.js';
import {
  type GenerateRequest,
  type GenerateResult,
  rolloutMachine,
  type SearchRequest,
  type SearchResult,
} from '../machines/rollout.js';
import { informationBlock, stopIds } from '../world/prompts.js';
import { observationText } from '../world/retrieval.js';
import type { WorldTokenizer } from '../world/tokenizer.js';
import { COMMAND_STREAM, type RolloutCommand, rolloutConsumerName } from './dispatch.js';
import { EventSink, factToEvent } from './event-sink.js';
import { requestGenerate } from './policy-service.js';
import { unpack } from './wire.js';

export interface RolloutWorkerOptions {
  runId: string;
  tokenizer: WorldTokenizer;
  /** Passages per search (the world's top-k). */
  topK: number;
  /** Rollouts run at once (default 16). */
  concurrency?: number;
  /** Heartbeat period; keep well under the consumer's ack wait (default 2 s). */
  heartbeatMs?: number;
  inspect?: (event: InspectionEvent) => void;
  log?: (line: string) => void;
}

/** The `generate` and `search` actors of a rollout machine, over NATS. */
export function remoteRolloutActors(nc: NatsConnection, runId: string, tok: WorldTokenizer, topK: number) {
  const stopTokens = stopIds(tok);
  const generate = fromPromise<GenerateResult, GenerateRequest>(async ({ input }) => {
    const r = await requestGenerate(nc, runId, {
      policyVersion: input.policyVersion,
      prompt: input.tokens,
      maxNewTokens: input.maxNewTokens,
      seed: input.seed,
      temperature: input.temperature,
      topP: input.topP,
      stopTokens,
    });
    const text = tok.decode(r.tokens);
    const last = r.tokens[r.tokens.length - 1];
    const finish = last === tok.eos ? 'eos' : r.finish === 'length' ? 'length' : 'stop';
    return {
      tokens: r.tokens,
      logprobs: r.logprobs,
      text: input.turn > 0 && text !== '' ? ` ${text}` : text,
      finish,
    };
  });
  const search = fromPromise<SearchResult, SearchRequest>(async ({ input }) => {
    const t0 = performance.now();
    const hits = (await requestSearch(nc, runId, [input.query], topK))[0] ?? [];
    const block = informationBlock(observationText(hits));
    return {
      tokens: tok.encode(block),
      text: ` ${block}`,
      passageIds: hits.map((h) => h.id),
      scores: hits.map((h) => h.score),
      latencyMs: performance.now() - t0,
      error: null,
    };
  });
  return { generate, search };
}

export class RolloutWorker implements AsyncDisposable {
  readonly stats = { completed: 0, failed: 0, redelivered: 0 };
  private messages: ConsumerMessages | null = null;
  private loop: Promise<void> | null = null;
  private readonly running = new Set<Promise<void>>();
  private stopped = false;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly store: EventStore,
    private readonly opts: RolloutWorkerOptions,
  ) {}

  /** Joins the run's rollout queue (the consumer must exist: ensureRolloutQueue). */
  static async start(
    nc: NatsConnection,
    js: JetStreamClient,
    store: EventStore,
    opts: RolloutWorkerOptions,
  ): Promise<RolloutWorker> {
    const w = new RolloutWorker(nc, store, opts);
    const consumer = await js.consumers.get(COMMAND_STREAM, rolloutConsumerName(opts.runId));
    const concurrency = opts.concurrency ?? 16;
    w.messages = await consumer.consume({ max_messages: concurrency });
    w.loop = w.run(concurrency);
    return w;
  }

  private async run(concurrency: number): Promise<void> {
    for await (const m of this.messages!) {
      if (this.stopped) {
        m.nak();
        continue;
      }
      const p = this.handle(m).finally(() => this.running.delete(p));
      this.running.add(p);
      while (this.running.size >= concurrency) await Promise.race(this.running);
    }
  }

  private async handle(m: JsMsg): Promise<void> {
    let cmd: RolloutCommand;
    try {
      cmd = unpack<RolloutCommand>(m.data);
      if (!cmd?.input?.rolloutId) throw new TypeError('not a rollout command');
    } catch (err) {
      this.opts.log?.(
        `rollout worker: dropping an undecodable command (seq ${m.seq}): ${(err as Error).message}`,
      );
      m.term();
      return;
    }
    if (m.info.deliveryCount > 1) this.stats.redelivered++;
    const heartbeat = setInterval(() => m.working(), this.opts.heartbeatMs ?? 2_000);
    try {
      const { runId, tokenizer, topK } = this.opts;
      const machine = rolloutMachine.provide({
        actors: remoteRolloutActors(this.nc, runId, tokenizer, topK),
      });
      const sink = new EventSink(this.store);
      const actor = createActor(machine, { input: cmd.input, inspect: this.opts.inspect });
      actor.on('*', (fact) => sink.push(factToEvent(fact as AkbeFact, { runId, step: cmd.step })));
      actor.start();
      await toPromise(actor as AnyActorRef);
      await sink.flush();
      clearInterval(heartbeat);
      await m.ackAck();
      this.stats.completed++;
    } catch (err) {
      clearInterval(heartbeat);
      this.stats.failed++;
      this.opts.log?.(`rollout worker: ${cmd.input.rolloutId} failed: ${(err as Error).message}`);
      m.nak(1_000);
    }
  }

  /** Stops pulling; rollouts in progress finish and are acked. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.messages?.close().catch(() => undefined);
    await this.loop?.catch(() => undefined);
    await Promise.all(this.running);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
