/**
 * The key of a process's Nats-Msg-Ids for a run (EventStore.useDedupeKey). Dedupe ids are the
 * event's identity (`<run>:3:learner.step`), so the broker-side id is keyed: whoever can compute
 * it can store a message under it first and have JetStream drop the real event as a duplicate.
 *
 * - 'credentials': HMAC-SHA256 over the run id, keyed by the nkey seed the process connected with.
 *   Nothing is stored: only a holder of that seed can compute the ids, a resumed orchestrator (same
 *   seed) computes the same ones, and rollout workers sharing the rollout credentials share a key
 *   (so a redelivered rollout's events dedupe against its first worker's).
 * - 'run-key': no credentials (an unsecured server, where any client may publish anything
 *   anyway): the run's random key in KV (runs-bucket.ts `<run>.dedupe-key`).
 */
import { createHmac } from 'node:crypto';

export type MessageIdScheme = 'credentials' | 'run-key';

/** Binds the derived key to its use, so the seed's HMAC here is no other protocol's value. */
const PURPOSE = 'akbe/nats-msg-id/v1';

/** The 'credentials' key of a run: HMAC-SHA256(seed, purpose NUL run id). */
export function credentialMessageKey(seed: Uint8Array, runId: string): Uint8Array {
  return new Uint8Array(createHmac('sha256', seed).update(`${PURPOSE}\0${runId}`).digest());
}

/** This process's key for the run and its scheme: from `seed` when it connected with one, else `runKey()`. */
export async function messageKeyOf(
  runId: string,
  seed: Uint8Array | undefined,
  runKey: () => Promise<Uint8Array>,
): Promise<{ key: Uint8Array; scheme: MessageIdScheme }> {
  if (seed && seed.length > 0) return { key: credentialMessageKey(seed, runId), scheme: 'credentials' };
  return { key: await runKey(), scheme: 'run-key' };
}
