/**
 * A rollout worker: pulls rollout commands of one run from the work queue (dispatch.ts), runs the
 * rollout machine for each with its `generate` and `callTool` actors calling the policy service and
 * the run's tools (src/tools) over NATS, appends the machine's facts to the event log, and acks the command only
 * once `rollout.completed` is stored. While a rollout runs the worker sends progress heartbeats
 * (`working`), so only a dead worker's rollouts are redelivered. Up to `concurrency` rollouts run
 * at once (their generate calls meet in the policy service's batcher).
 *
 * Text conventions are the policy's TextEnvironment (src/text/environment.ts): the world's for the
 * world base (every tag one token), Search-R1's for a Hugging Face checkpoint (tags as stop strings
 * on the decoded text). A tool's observation text is wrapped in the environment's `<information>`
 * block and tokenized alone (token-in/token-out: its ids are what the trajectory keeps).
 */
import type { Consumer, ConsumerMessages, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type AnyActorRef, createActor, fromPromise, type InspectionEvent, toPromise } from 'xstate';
import { consumeOptions, debugConsumer } from '../../events/consume.js';
import { EdgeGate, EdgeRejectedError } from '../../events/edge-gate.js';
import { delay, retryElection } from '../../events/retry.js';
import type { EventStore } from '../../events/store.js';
import { COMMAND_STREAM } from '../../events/subjects.js';
import type { AkbeFact } from '../../machines/facts.js';
import { type GenerateRequest, type GenerateResult, rolloutMachine } from '../../machines/rollout.js';
import type { TextEnvironment } from '../../text/environment.js';
import { DEFAULT_TOOLS, toolsNamed } from '../../tools/registry.js';
import type { AnyTool } from '../../tools/tool.js';
import { abortable } from '../../util/abortable.js';
import { killPoint, killPointArmed } from '../../util/kill-point.js';
import { EventSink } from '../log/event-sink.js';
import { factToEvent } from '../log/fact-events.js';
import { requestGenerate } from '../services/policy/policy-service.js';
import { type RolloutCommand, rolloutConsumerName } from './protocol.js';
import { envToolCallActor, toolTagsOf, turnDecodeRequest, turnResult } from './rollout-actors.js';
import { parseRolloutCommand } from './rollout-command.js';
import { natsServiceCall } from './tool-calls.js';

export interface RolloutWorkerOptions {
  runId: string;
  /** The policy's text conventions (prompts, stops, observations): src/text/environment.ts. */
  env: TextEnvironment;
  /** Passages per search (the world's top-k). */
  topK: number;
  /** The run's tools by name (default: search). */
  tools?: readonly string[];
  /** Rollouts run at once (default 16). */
  concurrency?: number;
  /** Heartbeat period; keep well under the consumer's ack wait (default 2 s). */
  heartbeatMs?: number;
  inspect?: (event: InspectionEvent) => void;
  log?: (line: string) => void;
}

/** The `generate` and `callTool` actors of a rollout machine, over NATS, in `env`'s text conventions. */
export function remoteRolloutActors(
  nc: NatsConnection,
  runId: string,
  env: TextEnvironment,
  topK: number,
  tools: readonly AnyTool[] = toolsNamed(DEFAULT_TOOLS, { topK }),
) {
  const toolTags = toolTagsOf(tools);
  const generate = fromPromise<GenerateResult, GenerateRequest>(async ({ input, signal }) => {
    // A policy worker still starting is waited for (the command is kept alive by heartbeats).
    const request = requestGenerate(
      nc,
      runId,
      { policyVersion: input.policyVersion, ...turnDecodeRequest(input, env) },
      undefined,
      { signal },
    );
    const r = await abortable(request, signal);
    return turnResult(env, input, r.tokens, r.logprobs, r.finish === 'length', toolTags);
  });
  const callTool = envToolCallActor(tools, natsServiceCall(nc, runId), env);
  return { generate, callTool };
}

export class RolloutWorker implements AsyncDisposable {
  readonly stats = { completed: 0, failed: 0, redelivered: 0, refused: 0 };
  private messages: ConsumerMessages | null = null;
  private loop: Promise<void> | null = null;
  private readonly running = new Set<Promise<void>>();
  private stopped = false;
  /** The consumer's max deliveries (-1: unlimited). */
  private maxDeliver = -1;
  /** Dead-letters the commands refused at the edge. */
  readonly edge: EdgeGate;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly store: EventStore,
    private readonly opts: RolloutWorkerOptions,
  ) {
    this.edge = new EdgeGate(nc, { detectedBy: `rollout-worker:${opts.runId}`, log: opts.log });
    this.tools = toolsNamed(opts.tools ?? DEFAULT_TOOLS, { topK: opts.topK });
  }

  /** The run's tools, made once (an unknown name fails the worker's start, not each rollout). */
  private readonly tools: AnyTool[];

  /** Joins the run's rollout queue (the consumer must exist: ensureRolloutQueue). */
  static async start(
    nc: NatsConnection,
    js: JetStreamClient,
    store: EventStore,
    opts: RolloutWorkerOptions,
  ): Promise<RolloutWorker> {
    const w = new RolloutWorker(nc, store, opts);
    const name = rolloutConsumerName(opts.runId);
    const consumer = await retryElection(js, `consumer ${name}`, () =>
      js.consumers.get(COMMAND_STREAM, name),
    );
    w.maxDeliver =
      (await retryElection(js, `consumer ${name}: info`, () => consumer.info())).config.max_deliver ?? -1;
    w.loop = w.run(consumer, opts.concurrency ?? 16);
    return w;
  }

  /**
   * Pulls until stopped. nats.js re-pulls by itself after missed heartbeats and reconnects; when
   * it gives up instead (the pull ends or fails, e.g. through a long cluster election), the
   * worker says so and pulls again a second later: a worker that silently stopped pulling would
   * stall the run.
   */
  private async run(consumer: Consumer, concurrency: number): Promise<void> {
    while (!this.stopped && !this.nc.isClosed()) {
      try {
        this.messages = await consumer.consume(consumeOptions(concurrency));
        debugConsumer(`rollout worker ${this.opts.runId}`, this.messages);
        if (this.stopped) await this.messages.close();
        for await (const m of this.messages) {
          if (this.stopped) {
            m.nak();
            continue;
          }
          const p = this.handle(m).finally(() => this.running.delete(p));
          this.running.add(p);
          while (this.running.size >= concurrency) await Promise.race(this.running);
        }
      } catch (err) {
        // The queue's iterator throws when the connection closes under it (NATS lost): said in
        // one line, never an unhandled rejection that kills the process with a stack.
        if (!this.stopped)
          this.opts.log?.(
            this.nc.isClosed()
              ? `rollout worker: the command queue ended: ${(err as Error).message}`
              : `rollout worker: pulling commands failed (${(err as Error).message}); pulling again`,
          );
      }
      if (!this.stopped && !this.nc.isClosed()) await delay(1_000);
    }
  }

  private async handle(m: JsMsg): Promise<void> {
    let cmd: RolloutCommand;
    try {
      cmd = parseRolloutCommand(m.data, this.opts.runId, { vocabSize: this.opts.env.codec.vocabSize });
    } catch (err) {
      // Refused at the edge: kept as a dead letter with its reason, then removed from the queue
      // (term). When the dead letter cannot be written, the command stays queued (nak).
      const e = err as EdgeRejectedError;
      this.opts.log?.(`rollout worker: refusing command seq ${m.seq}: ${e.message}`);
      this.stats.refused++;
      if (await this.edge.deadLetter(m.subject, m.data, e, { stream: m.info.stream, seq: m.seq })) m.term();
      else m.nak(1_000);
      return;
    }
    if (m.info.deliveryCount > 1) this.stats.redelivered++;
    const heartbeat = setInterval(() => m.working(), this.opts.heartbeatMs ?? 2_000);
    try {
      const { runId, env, topK } = this.opts;
      const machine = rolloutMachine.provide({
        actors: remoteRolloutActors(this.nc, runId, env, topK, this.tools),
      });
      const sink = new EventSink(this.store);
      const actor = createActor(machine, { input: cmd.input, inspect: this.opts.inspect });
      actor.on('*', (fact) => {
        sink.push(factToEvent(fact as AkbeFact, { runId }));
        if ((fact as AkbeFact).type === 'rollout.started' && killPointArmed('rollout-start', cmd.input.step))
          void sink.flush().then(() => killPoint('rollout-start', cmd.input.step));
      });
      actor.start();
      await toPromise(actor as AnyActorRef);
      await sink.flush();
      killPoint('rollout', cmd.input.step);
      clearInterval(heartbeat);
    } catch (err) {
      clearInterval(heartbeat);
      this.stats.failed++;
      const cause = `${cmd.input.rolloutId} failed (delivery ${m.info.deliveryCount} of ${this.maxDeliver}): ${(err as Error).message}`;
      this.opts.log?.(`rollout worker: ${cause}`);
      // The last attempt keeps its cause as the command's dead letter: the orchestrator, told by
      // JetStream that the rollout is out of deliveries, reads it to say why.
      if (this.maxDeliver > 0 && m.info.deliveryCount >= this.maxDeliver)
        await this.edge.deadLetter(m.subject, m.data, new EdgeRejectedError('handler-failed', cause), {
          stream: m.info.stream,
          seq: m.seq,
        });
      m.nak(1_000);
      return;
    }
    // rollout.completed is stored: the rollout is done even if the ack is lost (a cluster node
    // died with the consumer's leader); its redelivery would store only duplicates, counted once.
    this.stats.completed++;
    await retryElection(this.nc, `ack ${cmd.input.rolloutId}`, () => m.ackAck()).catch((err) =>
      this.opts.log?.(
        `rollout worker: ${cmd.input.rolloutId} done, its ack failed: ${(err as Error).message}`,
      ),
    );
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
