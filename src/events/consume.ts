/**
 * How akbe pulls from JetStream consumers, so that the loss of a cluster node is noticed and
 * survived in seconds.
 *
 * A pull request lives `expires` ms and the server sends idle heartbeats every `expires / 2`; the
 * client notices a dead node (or a consumer lost with it) after two missed heartbeats, asks for
 * the consumer's info and re-pulls, or recreates an ordered consumer. When that info request
 * fails (a stream electing a leader answers nothing) nats.js waits a jittered 0.5-1.5 x `expires`
 * before asking again. With its default of 30 s that is 30 s to notice plus up to 45 s per
 * failed retry: a run on a 3-node cluster stalled for over a minute after a node's SIGKILL.
 * 5 s: noticed in 5 s, retried every 2.5-7.5 s.
 *
 * AKBE_DEBUG=1 logs every consumer's status notifications (heartbeats missed, resets, no
 * responders, consumers recreated) to stderr with the consumer's label.
 */
import type { ConsumeOptions, ConsumerMessages } from '@nats-io/jetstream';

/** Pull request lifetime (ms) for every consume() akbe starts. */
export const PULL_EXPIRES_MS = 5_000;

/** Options for `consumer.consume()`: `max_messages` plus akbe's pull expiry. */
export function consumeOptions(maxMessages: number): ConsumeOptions {
  return { max_messages: maxMessages, expires: PULL_EXPIRES_MS };
}

/** With AKBE_DEBUG set: logs the consumer's status notifications (a no-op otherwise). */
export function debugConsumer(label: string, messages: ConsumerMessages): void {
  if (!process.env.AKBE_DEBUG) return;
  void (async () => {
    try {
      for await (const s of messages.status()) {
        if (s.type === 'next') continue; // one per pull: noise
        process.stderr.write(`akbe debug: consumer ${label}: ${JSON.stringify(s)}\n`);
      }
    } catch {
      // the consumer stopped
    }
  })();
}
