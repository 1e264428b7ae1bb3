/**
 * Issue 23 item 2 against a real nats-server and the real trainer service (tiny policy): the
 * trainer trains only on requests the run's orchestrator signed. A self-made request, a signed one
 * replayed for a later step, and one with a token changed after signing are each answered with a
 * TrainRequestRefused reason and train nothing (the run's current version stays 0); the signed
 * original then trains (version 1), so the refusals are not a trainer that refuses everything.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { createUser } from '@nats-io/nkeys';
import t from 'tap';
import { pack } from '../src/actors/nats/wire.js';
import type { TrainCall } from '../src/actors/services/trainer/protocol.js';
import { requestTrain, TRAINER_QUEUE } from '../src/actors/services/trainer/trainer-service.js';
import { writeDeadLetter } from '../src/events/dead-letter.js';
import { EventStore } from '../src/events/store.js';
import { DEAD_LETTER_STREAM, serviceSubject } from '../src/events/subjects.js';
import { signTrainRequest } from '../src/events/train-signature.js';
import { withNats } from './helpers/nats.js';
import { oneRowTrainCall } from './helpers/one-row-batch.js';
import { startTinyRoles } from './helpers/tiny-roles.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

const fx = await tinyRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const home = mkdtempSync(join(tmpdir(), 'akbe-train-sign-'));
t.teardown(() => rmSync(home, { recursive: true, force: true }));
const orchestrator = createUser();
const runId = 'sig-run';

const call = oneRowTrainCall;

const { started } = await startTinyRoles(nats.nc, store, fx, home, runId, tinySpec(fx), ['trainer'], {
  threads: 1,
  trainSigner: orchestrator.getPublicKey(),
});
t.teardown(() => started.stop());
// The version the trainer's policy holds: what a request that trained moves (the KV pointer is
// the orchestrator's to set, so it would not show a trainer fooled into training).
const trainedVersion = () => (started.trainer ?? started.policy)?.version;
const send = (req: TrainCall) => requestTrain(nats.nc, runId, req, { timeoutMs: 60_000 });

t.test('(a) a self-made (unsigned, or signed by another key) train request is refused', async (t) => {
  await t.rejects(send(call()), /TrainRequestRefused.*unsigned|unsigned/);
  const rogue = { ...call(), signature: signTrainRequest(createUser().getSeed(), runId, call()) };
  await t.rejects(send(rogue), /not by the run's orchestrator/);
  t.not(trainedVersion(), 1, 'nothing trained');
});

t.test("(b) the orchestrator's signed request replayed for a later step is refused", async (t) => {
  const replay = { ...call(1), signature: signTrainRequest(orchestrator.getSeed(), runId, call(0)) };
  await t.rejects(send(replay), /does not verify for run sig-run step 1/);
  t.not(trainedVersion(), 1, 'nothing trained');
});

t.test('(c) one token changed after signing is refused', async (t) => {
  const signature = signTrainRequest(orchestrator.getSeed(), runId, call());
  await t.rejects(send({ ...call(0, [5, 6, 7, 8, 9, 11]), signature }), /does not verify/);
  t.not(trainedVersion(), 1, 'nothing trained');
});

t.test('the signed request itself trains', async (t) => {
  const reply = await requestTrain(nats.nc, runId, call(), {
    timeoutMs: 60_000,
    seed: orchestrator.getSeed(),
  });
  t.equal(reply.version, 1);
  t.equal(trainedVersion(), 1);
});

t.test(
  "the issue's attack: a rollout key's push consumer delivers a stored train request to svc.train",
  async (t) => {
    const attacker = await nats.connectAs('rollout');
    t.teardown(() => attacker.close());
    const ajs = jetstream(attacker);
    // The forged request stored where a rollout key may write (a dead letter), then a push
    // consumer whose deliver subject is the run's svc.train in the trainers' queue group.
    await writeDeadLetter(ajs, {
      subject: serviceSubject(runId, 'train'),
      bytes: pack({ ...call(1), policyVersion: 1 }),
      reason: 'invalid',
      detail: 'planted',
      detectedBy: 'attacker',
    });
    const before = trainedVersion();
    let created = 'created';
    try {
      const jsm = await jetstreamManager(attacker, { timeout: 5_000 });
      await jsm.consumers.add(DEAD_LETTER_STREAM, {
        deliver_subject: serviceSubject(runId, 'train'),
        deliver_group: TRAINER_QUEUE,
        ack_policy: AckPolicy.None,
        deliver_policy: DeliverPolicy.All,
      });
    } catch (err) {
      created = `refused: ${(err as Error).message}`;
    }
    await new Promise((r) => setTimeout(r, 1_500));
    t.equal(trainedVersion(), before, `nothing trained (consumer ${created})`);
    if (created === 'created') {
      // Delivered, and refused at the trainer's edge: a JetStream delivery's reply is no inbox.
      const refused = [];
      for await (const d of store.deadLetters(runId))
        if (d.detectedBy === 'svc.train' && /not an inbox/.test(d.detail)) refused.push(d);
      // Refused at the trainer's edge (a JetStream delivery's reply is no inbox), and not stored
      // again: each new dead letter would be delivered again by the same consumer, for ever.
      t.equal(refused.length, 0, 'a delivered dead letter is not dead-lettered again (no loop)');
      let letters = 0;
      for await (const _ of store.deadLetters(runId)) letters++;
      t.equal(letters, 1, "only the attacker's own letter is in the stream");
    }
  },
);
