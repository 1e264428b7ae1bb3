/**
 * Signed train requests (issue 23 item 2). The orchestrator signs each train request with its
 * nkey (ed25519) over a message that binds run, step, policy version and the request's canonical
 * digest (train-digest.ts), so the trainer can refuse a request no orchestrator made (a rollout
 * key's self-made one), a signed one replayed for another run/step/version, and one whose body
 * was changed after signing (one token changes the digest).
 *
 * Signed bytes (version 1): "akbe-train-sign/1\n" + JSON.stringify([runId, step, policyVersion,
 * requestSha256, signer]). The signature travels beside the request as
 * { signer: "U...", signature: base64 }.
 */
import { fromPublic, fromSeed } from '@nats-io/nkeys';
import { type DigestibleTrainRequest, trainRequestDigest } from './train-digest.js';

const DOMAIN = 'akbe-train-sign/1\n';

export interface TrainRequestSignature {
  /** The signer's nkey public key (U...). */
  signer: string;
  /** Base64 ed25519 signature over `signedBytes`. */
  signature: string;
}

interface Binding {
  runId: string;
  step: number;
  policyVersion: number;
  requestSha256: string;
}

function signedBytes(b: Binding, signer: string): Uint8Array {
  const fields = [b.runId, b.step, b.policyVersion, b.requestSha256, signer];
  return new TextEncoder().encode(`${DOMAIN}${JSON.stringify(fields)}`);
}

/** The public key (U...) of an nkey seed: the signer its signatures name. */
export function signerOf(seed: Uint8Array): string {
  return fromSeed(seed).getPublicKey();
}

/** Signs a train request for a run with an nkey seed (SU...). */
export function signTrainRequest(
  seed: Uint8Array,
  runId: string,
  req: DigestibleTrainRequest,
): TrainRequestSignature {
  const kp = fromSeed(seed);
  const signer = kp.getPublicKey();
  const b = {
    runId,
    step: req.step,
    policyVersion: req.policyVersion,
    requestSha256: trainRequestDigest(runId, req),
  };
  return { signer, signature: Buffer.from(kp.sign(signedBytes(b, signer))).toString('base64') };
}

/**
 * Why a request must not be trained on, or null when it carries a valid signature by
 * `trustedSigner` for this run. The digest is recomputed from the request as received, so a
 * changed body, or a signature made for another step/run/version, does not verify.
 */
export function trainRequestRefusal(
  trustedSigner: string,
  runId: string,
  req: DigestibleTrainRequest,
  sig: Partial<TrainRequestSignature> | undefined,
): string | null {
  if (!sig || typeof sig.signer !== 'string' || typeof sig.signature !== 'string')
    return 'unsigned train request (the orchestrator signs every one)';
  if (sig.signer !== trustedSigner)
    return `train request signed by ${sig.signer}, not by the run's orchestrator ${trustedSigner}`;
  let requestSha256: string;
  try {
    requestSha256 = trainRequestDigest(runId, req);
  } catch (e) {
    return `train request cannot be digested: ${(e as Error).message}`;
  }
  const b = { runId, step: req.step, policyVersion: req.policyVersion, requestSha256 };
  let ok = false;
  try {
    ok = fromPublic(trustedSigner).verify(
      signedBytes(b, sig.signer),
      new Uint8Array(Buffer.from(sig.signature, 'base64')),
    );
  } catch {
    ok = false;
  }
  if (!ok)
    return `train request signature does not verify for run ${runId} step ${req.step} version ${req.policyVersion} (changed after signing, or signed for another)`;
  return null;
}
