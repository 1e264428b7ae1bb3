/**
 * Issue 11 item 6 (cluster): a tiny training run on the 3-node JetStream cluster of
 * infra/nats/cluster (R3 streams, KV and object store, credentials required) loses one node when
 * step 1 starts: the node the run is connected to, which also leads AKBE_EVENTS. The run
 * completes on the other two, and no event is lost or stored twice.
 *
 * The kill lands at a fixed point of the run (the orchestrator's step.started fact for step 1),
 * not after a delay: a timed kill lands wherever the scheduler happens to be.
 */
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent, EventType } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { EVENTS_STREAM } from '../src/events/subjects.js';
import type { AkbeFact } from '../src/machines/facts.js';
import { withNatsCluster } from './helpers/nats-cluster.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

const debug = process.env.AKBE_DEBUG
  ? (line: string) => process.stderr.write(`[failover] ${line}\n`)
  : () => {};

t.test(
  'a 3-node cluster loses the node the run uses (the event log leader) at step 1: no event lost',
  async (t) => {
    const fx = await tinyRunFixture();
    const cluster = await withNatsCluster(t);
    const STEPS = 3;
    const spec = tinySpec(fx, { steps: STEPS });

    // Streams first (R3: the connection reports a cluster), then find the event log's leader.
    const setup = await cluster.connect();
    await EventStore.open(setup);
    const info = await (await jetstreamManager(setup)).streams.info(EVENTS_STREAM);
    await setup.close();
    t.equal(info.config.num_replicas, 3, 'AKBE_EVENTS has 3 replicas on the cluster');
    const leader = cluster.nodes.find((n) => n.name === info.cluster?.leader);
    if (!leader) throw new Error(`no leader for ${EVENTS_STREAM}: ${JSON.stringify(info.cluster)}`);
    const others = cluster.nodes.filter((n) => n !== leader);

    // The run connects to the leader first; the other two are where it fails over to.
    // AKBE_TEST_FAILOVER=away (a manual variant): the run stays connected to a node that lives,
    // so only the streams' leaders and the consumers on the killed node are lost.
    const away = process.env.AKBE_TEST_FAILOVER === 'away';
    const nc = await cluster.connect(away ? others : [leader, ...others]);
    t.teardown(() => nc.close());
    t.equal(nc.info?.server_name, (away ? others[0] : leader).name, `connected to ${nc.info?.server_name}`);
    const store = await EventStore.open(nc);
    void (async () => {
      for await (const s of nc.status()) debug(`connection: ${JSON.stringify(s)}`);
    })();

    const facts = new Map<string, number>();
    let killed: Promise<void> | null = null;
    const onFact = (f: AkbeFact) => {
      facts.set(f.type, (facts.get(f.type) ?? 0) + 1);
      if (f.type === 'step.started' && f.step === 1 && !killed) {
        debug(`killing ${leader.name} at step 1`);
        killed = leader.kill();
      }
    };
    const runId = 'failover1';
    const started = Date.now();
    const result = await runTraining({
      nc,
      js: jetstream(nc),
      store,
      runId,
      spec,
      runDir: join(cluster.dir, 'runs', runId),
      threads: 1,
      concurrency: 8,
      onFact,
      log: debug,
      // A lost rollout command or completion would stall: fail within the test's time, not 10 min.
      stallTimeoutMs: 60_000,
    });
    debug(`run finished in ${Date.now() - started} ms`);
    t.ok(killed, 'the node was killed mid-run');
    await killed;
    t.equal(result.steps, STEPS, 'every step ran');
    t.not(nc.info?.server_name, leader.name, `the run went on through ${nc.info?.server_name}`);
    const after = await (await jetstreamManager(nc)).streams.info(EVENTS_STREAM);
    t.not(after.cluster?.leader, leader.name, `AKBE_EVENTS has a new leader (${after.cluster?.leader})`);

    const events: AkbeEvent[] = [];
    const seqs: number[] = [];
    for await (const { seq, event } of store.replay(runId)) {
      events.push(event);
      seqs.push(seq);
    }
    const count = (type: EventType) => events.filter((e) => e.type === type).length;
    t.equal(count('learner.step'), STEPS, 'one learner.step per step');
    t.equal(count('policy.published'), STEPS, 'one policy.published per step');
    const rollouts = STEPS * spec.train.batchQuestions * (spec.train.gWithTool + spec.train.gNoTool);
    t.equal(count('rollout.started'), rollouts, 'every rollout started once');
    t.equal(count('rollout.completed'), rollouts, 'every rollout completed once');
    const last = events.at(-1);
    t.equal(last?.type, 'run.finished', 'run.finished is the last event');
    t.equal(last?.type === 'run.finished' && last.data.status, 'completed', 'the run completed');
    // Every fact the orchestrator's machines emitted is in the log exactly once.
    for (const [type, n] of facts) t.equal(count(type as EventType), n, `${type}: ${n} facts, ${n} events`);
    const ids = events.map((e) => e.meta.dedupeId);
    t.equal(new Set(ids).size, ids.length, 'no event stored twice');
    t.same(
      seqs,
      seqs.map((_, i) => i + 1),
      'the log is contiguous from sequence 1 (only this run writes to it)',
    );
    t.same(auditRun(events).mismatches, [], 'the log audits clean');
  },
);
