/**
 * Issue 7 acceptance (resume): `akbe train` is SIGKILLed after step 1 of 3 has been published;
 * a resumed orchestrator continues from the log (rollouts already stored are not redone, the
 * policy version comes from the checkpoint store), the run finishes, and the log audits clean.
 * keepCheckpoints (recorded in run.started) prunes across the crash.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import t from 'tap';
import { readSeed, seedPath } from '../src/actors/nats/nats-auth.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { readRunSpec } from '../src/actors/roles/roles.js';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { CHECKPOINT_BUCKET } from '../src/events/subjects.js';
import { startCli, until } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { baseRunFixture, TINY_TRAIN } from './helpers/tiny-run.js';
import { assertVerifies } from './helpers/verify.js';

t.test(
  'an orchestrator killed after step 1 of 3 resumes from the log and the run finishes clean',
  async (t) => {
    const fx = await baseRunFixture();
    const nats = await withNats(t);
    const store = await EventStore.open(nats.nc);
    const home = mkdtempSync(join(tmpdir(), 'akbe-resume-'));
    t.teardown(() => rmSync(home, { recursive: true, force: true }));
    const runId = 'resume1';
    const config = join(home, 'tiny.json');
    writeFileSync(
      config,
      JSON.stringify({
        ...TINY_TRAIN,
        steps: 3,
        world: fx.worldDir,
        policy: fx.policyDir,
        evalQuestions: 0,
        keepCheckpoints: 2,
      }),
    );
    const published = async () => {
      const versions: number[] = [];
      for await (const { event } of store.replay(runId))
        if (event.type === 'policy.published') versions.push(event.data.version);
      return versions;
    };
    const first = startCli(
      [
        'train',
        '--config',
        config,
        '--run-id',
        runId,
        '--nats',
        nats.server.url,
        '--home',
        home,
        '--concurrency',
        '8',
      ],
      // The run also kills itself after step 1's labels: on an idle machine the 3 tiny steps can
      // finish between two polls of the test's own kill below.
      { AKBE_TEST_KILL_AT: 'labels:1' },
    );
    t.teardown(() => first.child.kill('SIGKILL'));
    await until('version 1 published', async () => (await published()).includes(1), 240_000);
    first.child.kill('SIGKILL');
    t.equal(await first.exited, null, 'the orchestrator died of SIGKILL');
    t.notOk((await published()).includes(3), 'the run was not finished when it was killed');

    const spec = await readRunSpec(store, runId);
    const result = await runTraining({
      nc: nats.nc,
      js: jetstream(nats.nc),
      store,
      runId,
      spec,
      runDir: join(home, 'runs', runId),
      resume: true,
      concurrency: 8,
      threads: 1,
    });
    t.ok(
      result.resumedFrom && result.resumedFrom.version >= 1,
      `resumed from v${result.resumedFrom?.version}`,
    );
    t.equal(result.steps, 3);
    t.equal(result.policyVersion, 3);

    const events: AkbeEvent[] = [];
    for await (const { event } of store.replay(runId)) events.push(event);
    const count = (type: AkbeEvent['type']) => events.filter((e) => e.type === type).length;
    const perStep = spec.train.batchQuestions * (spec.train.gWithTool + spec.train.gNoTool);
    const rollouts = events.filter((e) => e.type === 'rollout.completed');
    t.equal(rollouts.length, 3 * perStep, 'every rollout of the 3 steps stored once');
    t.equal(new Set(rollouts.map((e) => e.meta.rolloutId)).size, 3 * perStep);
    t.ok(
      rollouts.every((e) => e.meta.policyVersion === e.meta.step),
      'on-policy across the crash',
    );
    t.equal(count('learner.step'), 3);
    t.equal(count('boundary.labeled'), 3 * spec.train.batchQuestions, 'labels written once');
    t.equal(count('run.started'), 1);
    // akbe train signs its train requests with the orchestrator's key, and says which in the log
    // (its steps trained, so its own trainer accepted them: issue 23 item 2 by default).
    const signer = events.find((e): e is EventOf<'run.started'> => e.type === 'run.started')?.data
      .trainSigner;
    t.equal(
      signer,
      readSeed(seedPath(nats.authDir, 'orchestrator')).getPublicKey(),
      'run.started.trainSigner',
    );
    // What the orchestrator believed (issue 23 item 4): the CA of the server it was given, found
    // through the local server registry, by its fingerprint.
    const natsTrust = events.find((e): e is EventOf<'run.started'> => e.type === 'run.started')?.data.config
      .natsTrust;
    const caSha256 = new X509Certificate(readFileSync(nats.server.caFile!)).fingerprint256.replaceAll(
      ':',
      '',
    );
    t.same(
      natsTrust,
      { tls: 'ca', caSource: 'server', caSha256: caSha256.toLowerCase() },
      'run.started.config.natsTrust',
    );
    t.same(await published(), [1, 2, 3]);
    t.equal(events.find((e) => e.type === 'run.finished')?.data.status, 'completed');
    // keepCheckpoints 2 (from run.started, across the crash): v1 went once v3 was recorded, from disk
    // and from the object store; v0 (the base) stays.
    t.same(readdirSync(join(home, 'runs', runId, 'checkpoints')).sort(), ['v0', 'v2', 'v3']);
    const stored = (await new Objm(nats.nc).open(CHECKPOINT_BUCKET).then((o) => o.list())).map((i) => i.name);
    t.same([...new Set(stored.filter((n) => n.startsWith(`${runId}/`)).map((n) => n.split('/')[1]))].sort(), [
      'v0',
      'v2',
      'v3',
    ]);
    const audit = auditRun(events);
    t.same(audit.mismatches, [], 'the resumed log audits clean');
    t.equal(audit.checked.steps, 3);
    // Across the crash (the resumed trainer loaded v_k and its AdamW state from the checkpoint)
    // and past the pruned v1, re-training from v0 gives every published version bit for bit.
    await assertVerifies(t, { runId, natsUrl: nats.server.url, home, steps: 3 });
  },
);
