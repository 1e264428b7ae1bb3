/**
 * Core-NATS requests that survive the loss of the server they went through.
 *
 * A request or its reply that was inside a NATS server when it died is gone; nats.js then waits
 * for the whole timeout (2 min for svc.generate, 30 min for svc.train) although the client has
 * reconnected to another cluster node in a second. Here each request has its own reply inbox and
 * is published again, to the same inbox, after every reconnect until a reply arrives or the
 * timeout passes; the first reply wins. akbe's services are safe to ask twice: generation is
 * seeded, a search is a read, and the trainer answers a retried step with the version it already
 * published (trainer-service.ts).
 *
 * "No responders" is asked again (250 ms doubling to 2 s) for up to 30 s on a cluster: a service
 * whose node died is gone until it has reconnected elsewhere, and without this every rollout
 * asking it meanwhile failed a delivery attempt. On a single server it fails at once unless the
 * caller waits for a service that may still be starting (`waitForResponderMs`: the trainer).
 *
 * Errors are the ones nats.js gives a plain request (TimeoutError, NoRespondersError), so callers
 * report them the same way.
 */
import { createInbox, errors, type Msg, type NatsConnection, type Payload } from '@nats-io/transport-node';
import { electionWindowMs, onReconnect } from '../events/retry.js';

/** `nc.request`, published again after each reconnect while no reply has arrived. */
export function requestResending(
  nc: NatsConnection,
  subject: string,
  data: Payload,
  timeoutMs: number,
  waitForResponderMs = 0,
): Promise<Msg> {
  return new Promise<Msg>((resolve, reject) => {
    const inbox = createInbox();
    const started = Date.now();
    const noRespondersWindow = Math.max(electionWindowMs(nc), waitForResponderMs);
    let noResponderWait = 250;
    let retryTimer: ReturnType<typeof setTimeout> | undefined;
    let done = false;
    const finish = (err: Error | null, msg?: Msg) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(retryTimer);
      stopWatching();
      sub.unsubscribe();
      if (err) reject(err);
      else resolve(msg!);
    };
    const sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        if (err) return finish(err);
        // The server's "no responders" status: an empty message with code 503. On a cluster the
        // service may be reconnecting from a lost node (or still starting): ask again, backing
        // off, for up to the election window.
        if (msg.headers?.code === 503 && msg.data.length === 0) {
          if (Date.now() + noResponderWait > started + noRespondersWindow)
            return finish(new errors.NoRespondersError(subject));
          retryTimer = setTimeout(send, noResponderWait);
          noResponderWait = Math.min(noResponderWait * 2, 2_000);
          return;
        }
        finish(null, msg);
      },
    });
    // As nats.js does for a plain request: a closed connection fails the request at once.
    void sub.closed.then(() => finish(new errors.ClosedConnectionError()));
    const timer = setTimeout(() => finish(new errors.TimeoutError()), timeoutMs);
    const send = () => {
      try {
        nc.publish(subject, data, { reply: inbox });
      } catch (err) {
        finish(err as Error);
      }
    };
    const stopWatching = onReconnect(nc, send);
    send();
  });
}
