/**
 * A rollout worker started before the policy and search services (session 5, found and left
 * open): on a single nats-server each svc.generate / svc.search request found "no responders" at
 * once, failed the rollout's delivery attempt, and after max deliver the rollout was a terminal
 * failure. Now a rollout's service calls wait for a responder (SERVICE_START_WAIT_MS) while the
 * worker's heartbeats keep its command alive: a rollout whose policy subscribes ~1 s late and
 * whose search service subscribes 0.5 s after the first turn is answered completes on its first delivery.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { answer, unpack } from '../src/actors/nats/wire.js';
import { dispatchRollout, ensureRolloutQueue } from '../src/actors/orchestrator/dispatch.js';
import { rolloutConsumerName } from '../src/actors/rollout/protocol.js';
import { RolloutWorker } from '../src/actors/rollout/rollout-worker.js';
import type { GenerateCall, GenerateReply } from '../src/actors/services/policy/protocol.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { COMMAND_STREAM, serviceSubject } from '../src/events/subjects.js';
import { rolloutIdOf } from '../src/machines/question.js';
import { worldEnvironment } from '../src/text/environment.js';
import { WorldTokenizer } from '../src/text/word-tokenizer.js';
import { withNats } from './helpers/nats.js';

t.test('a rollout waits for a policy and a search service that start late: first delivery', async (t) => {
  const nats = await withNats(t);
  const js = jetstream(nats.nc);
  const store = await EventStore.open(nats.nc);
  const tok = WorldTokenizer.build(['paris']);
  const env = worldEnvironment(tok);
  const runId = 'late1';
  // A short ack wait: the 1-2 s waits below outlast it, so only heartbeats keep the command.
  await ensureRolloutQueue(await jetstreamManager(nats.nc), runId, { ackWaitMs: 1_000, maxDeliver: 3 });
  const logs: string[] = [];
  const worker = await RolloutWorker.start(nats.nc, js, store, {
    runId,
    env,
    topK: 1,
    heartbeatMs: 250,
    log: (l) => logs.push(l),
  });
  t.teardown(() => worker.stop());
  const rolloutId = rolloutIdOf(0, 'q1', 'with-tool', 0);
  await dispatchRollout(js, {
    runId,
    input: {
      step: 0,
      questionId: 'q1',
      rolloutId,
      index: 0,
      path: 'with-tool',
      policyVersion: 0,
      promptTokens: env.promptIds('with-tool', 'capital?'),
      gold: ['paris'],
      seed: 1,
      limits: { maxToolCalls: 1, maxResponseTokens: 64 },
    },
  });
  // The policy searches first, then answers once it has read an observation.
  const turn = (prompt: number[]) =>
    tok.encode(
      prompt.includes(tok.tag['</information>']) ? '<answer> paris </answer>' : '<search> paris </search>',
    );
  const generates: number[] = [];
  const searches: number[] = [];
  const t0 = Date.now();
  let search: ReturnType<typeof setTimeout> | undefined;
  const policy = setTimeout(() => {
    const sub = nats.nc.subscribe(serviceSubject(runId, 'generate'), {
      callback: (_e, m) => {
        generates.push(Date.now() - t0);
        // The search service comes 0.5 s after the first turn is answered: its first ask is early.
        if (generates.length === 1) search = setTimeout(startSearch, 500);
        void answer<GenerateReply>(m, async () => {
          const tokens = turn(unpack<GenerateCall>(m.data).prompt);
          return { tokens, logprobs: tokens.map(() => -0.5), finish: 'stop_token', version: 0 };
        });
      },
    });
    t.teardown(() => sub.unsubscribe());
  }, 1_000);
  const startSearch = () => {
    const sub = nats.nc.subscribe(serviceSubject(runId, 'search'), {
      callback: (_e, m) => {
        searches.push(Date.now() - t0);
        m.respond(
          JSON.stringify({ results: [[{ id: 'p1', title: 'Paris', contents: 'Paris\nparis', score: 1 }]] }),
        );
      },
    });
    t.teardown(() => sub.unsubscribe());
  };
  t.teardown(() => {
    clearTimeout(policy);
    clearTimeout(search);
  });

  const follow = new AbortController();
  t.teardown(() => follow.abort());
  let completed: AkbeEvent | undefined;
  for await (const { event } of store.replay(runId, { follow: true, signal: follow.signal }))
    if (event.type === 'rollout.completed') {
      completed = event;
      break;
    }
  t.equal(completed?.meta.rolloutId, rolloutId, 'rollout.completed is stored');
  t.ok(generates[0] >= 1_000, `the policy answered after it subscribed (${generates[0]} ms)`);
  t.ok(
    searches[0] >= generates[0] + 500,
    `the search service answered after it subscribed (${searches[0]} ms, the first turn ${generates[0]} ms)`,
  );
  await worker.stop();
  t.same(worker.stats, { completed: 1, failed: 0, redelivered: 0, refused: 0 }, 'no attempt burned');
  t.same(logs, [], 'no failed delivery logged');
  const info = await (await jetstreamManager(nats.nc)).consumers.info(
    COMMAND_STREAM,
    rolloutConsumerName(runId),
  );
  t.equal(info.delivered.consumer_seq, 1, 'JetStream delivered the command once (the heartbeats kept it)');
  t.equal(info.num_ack_pending, 0, 'acked');
});
