/**
 * Where the embedded trainer trains (issue 13 item 3: the policy keeps decoding while a new version
 * is made). A synchronous run's policy and trainer share one worker thread: a step moves the
 * serving policy in place. An asynchronous run's trainer has a thread of its own, which never
 * decodes; the policy then takes the new version from its checkpoint. Checked through svc.train
 * and svc.generate: after one update, version 1 decodes token for token as a fresh policy loaded
 * from the v1 checkpoint does, and version 0 (still in flight at η = 1) as the base does.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { CheckpointStore } from '../src/actors/checkpoints/checkpoints.js';
import { startRoles } from '../src/actors/roles/roles.js';
import { requestGenerate } from '../src/actors/services/policy/policy-service.js';
import { requestTrain } from '../src/actors/services/trainer/trainer-service.js';
import { EventStore } from '../src/events/store.js';
import { PolicyHost } from '../src/gpu/policy-host.js';
import { withNats } from './helpers/nats.js';
import { oneRowTrainCall } from './helpers/one-row-batch.js';
import { startTinyRoles } from './helpers/tiny-roles.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

const fx = await tinyRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const home = mkdtempSync(join(tmpdir(), 'akbe-trainer-thread-'));
t.teardown(() => rmSync(home, { recursive: true, force: true }));

const GEN = { prompt: [5, 6, 7], maxNewTokens: 12, seed: 7, temperature: 1, topP: 1, stopTokens: [] };

async function roles(runId: string, maxStaleness: number) {
  const spec = tinySpec(fx, { maxStaleness });
  const r = await startTinyRoles(nats.nc, store, fx, home, runId, spec, ['policy', 'trainer'], {
    threads: 1,
  });
  t.teardown(() => r.started.stop());
  return r;
}

const train = (runId: string) => requestTrain(nats.nc, runId, oneRowTrainCall(), { timeoutMs: 120_000 });

/** What a policy freshly loaded from `dir` decodes for GEN. */
async function freshTokens(dir: string): Promise<number[]> {
  const host = await PolicyHost.start({ checkpoint: dir, intraOpThreads: 1 });
  try {
    return (await host.generate(GEN)).tokens;
  } finally {
    await host.close();
  }
}

t.test('synchronous: the policy and the trainer are one thread', async (t) => {
  const { started } = await roles('tt-sync', 0);
  t.ok(started.policy, 'the policy role started');
  t.equal(started.trainer, started.policy, 'the trainer trains the serving policy in place');
});

t.test('asynchronous: the trainer has its own thread; versions reach the policy intact', async (t) => {
  const runId = 'tt-async';
  const { started, checkpoints } = await roles(runId, 1);
  t.ok(started.policy && started.trainer);
  t.not(started.trainer!.host, started.policy!.host, 'a second worker thread trains');
  t.equal(started.trainer!.decodes, false, 'the trainer thread holds no versions for decoding');
  const base = await freshTokens(fx.policyDir);
  t.same((await requestGenerate(nats.nc, runId, { policyVersion: 0, ...GEN })).tokens, base, 'v0 before');
  const reply = await train(runId);
  t.equal(reply.version, 1);
  t.equal(started.policy!.version, 0, 'training did not touch the decoding thread');
  const v1 = await freshTokens(await checkpoints.local(1));
  t.not(
    v1.join(' '),
    base.join(' '),
    'the update changed what the policy samples (else this proves nothing)',
  );
  const got1 = await requestGenerate(nats.nc, runId, { policyVersion: 1, ...GEN });
  t.equal(got1.version, 1);
  t.same(got1.tokens, v1, 'version 1 decodes as its checkpoint does');
  t.equal(started.policy!.version, 1, 'the policy moved to version 1 on demand');
  const got0 = await requestGenerate(nats.nc, runId, { policyVersion: 0, ...GEN });
  t.same(got0.tokens, base, 'version 0, still in flight at η = 1, decodes as the base');
});

t.test('an external engine is refused where akbe must decode itself', async (t) => {
  const engine = { url: 'http://127.0.0.1:1/v1' }; // never reached: refused before connecting
  const runId = 'tt-engine-maxStaleness';
  const checkpoints = await CheckpointStore.open(nats.nc, runId, join(home, runId));
  await checkpoints.importBase(fx.policyDir);
  await t.rejects(
    startRoles(
      nats.nc,
      jetstream(nats.nc),
      store,
      checkpoints,
      runId,
      tinySpec(fx, { maxStaleness: 1 }),
      ['policy'],
      { engine },
    ),
    { message: /maxStaleness >= 1 needs the embedded policy/ },
  );
});

t.test('batchInvariantDecode (the default) with an external engine: said, not refused', async (t) => {
  const engine = { url: 'http://127.0.0.1:1/v1' }; // nothing listens: connecting fails after the check
  const runId = 'tt-engine-invariant';
  const checkpoints = await CheckpointStore.open(nats.nc, runId, join(home, runId));
  await checkpoints.importBase(fx.policyDir);
  const lines: string[] = [];
  const spec = tinySpec(fx, {});
  t.equal(spec.train.batchInvariantDecode, true, 'the default spec asks for it');
  const err = await startRoles(nats.nc, jetstream(nats.nc), store, checkpoints, runId, spec, ['policy'], {
    engine,
    log: (l) => lines.push(l),
  }).then(
    () => null,
    (e: Error) => e,
  );
  t.notMatch(String(err?.message), /batchInvariantDecode/, 'not refused for the setting');
  t.match(lines.join('\n'), /batchInvariantDecode applies to akbe's own decoder only/, 'the log says so');
});
