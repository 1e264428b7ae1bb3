/**
 * src/events/train-signature.ts: a signature binds run, step, policy version and body; a
 * self-made, replayed or edited request is refused with a reason. Real nkeys (ed25519).
 */
import { createUser } from '@nats-io/nkeys';
import t from 'tap';
import { signTrainRequest, trainRequestRefusal } from '../src/events/train-signature.js';
import { tinyTrainRequest } from './helpers/tiny-train-request.js';

const tiny = tinyTrainRequest;

const orch = createUser();
const pub = orch.getPublicKey();
const seed = orch.getSeed();

t.test('a request signed by the orchestrator verifies', async (t) => {
  const sig = signTrainRequest(seed, 'r1', tiny());
  t.equal(sig.signer, pub);
  t.equal(trainRequestRefusal(pub, 'r1', tiny(), sig), null);
});

t.test('unsigned, or signed by another key (a rollout key), is refused', async (t) => {
  t.match(trainRequestRefusal(pub, 'r1', tiny(), undefined), /unsigned/);
  const rogue = createUser();
  const own = signTrainRequest(rogue.getSeed(), 'r1', tiny());
  t.match(trainRequestRefusal(pub, 'r1', tiny(), own), /not by the run's orchestrator/);
  // claiming the orchestrator as signer with the rogue's signature does not verify
  t.match(
    trainRequestRefusal(pub, 'r1', tiny(), { signer: pub, signature: own.signature }),
    /does not verify/,
  );
});

t.test('a signed request replayed for another step, version or run is refused', async (t) => {
  const sig = signTrainRequest(seed, 'r1', tiny(0));
  t.match(trainRequestRefusal(pub, 'r1', tiny(1), sig), /does not verify for run r1 step 1/);
  t.match(trainRequestRefusal(pub, 'r1', { ...tiny(0), policyVersion: 3 }, sig), /does not verify/);
  t.match(trainRequestRefusal(pub, 'r2', tiny(0), sig), /does not verify for run r2/);
});

t.test('one token changed after signing is refused', async (t) => {
  const sig = signTrainRequest(seed, 'r1', tiny());
  const edited = tiny();
  edited.batch.inputIds = Int32Array.of(5, 8);
  t.match(trainRequestRefusal(pub, 'r1', edited, sig), /does not verify/);
  t.match(trainRequestRefusal(pub, 'r1', tiny(), { ...sig, signature: 'garbage' }), /does not verify/);
});
