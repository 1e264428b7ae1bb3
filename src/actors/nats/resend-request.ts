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
 * caller waits for a service that may still be starting or restarting (`waitForResponderMs`: the
 * train request, a rollout's generate and tool calls, SERVICE_START_WAIT_MS). A request nobody
 * received has not started its timeout: it counts from the last publish, so a wait for a service
 * that starts late is not cut by a shorter reply timeout (svc.search: 30 s). An abort (`signal`)
 * or a closed connection ends the request, waiting or not, at once.
 *
 * Errors are the ones nats.js gives a plain request (TimeoutError, NoRespondersError), so callers
 * report them the same way.
 */
import { createInbox, errors, type Msg, type NatsConnection, type Payload } from '@nats-io/transport-node';
import { electionWindowMs, onReconnect } from '../../events/retry.js';

/**
 * How long a call waits on a single server for a service with no subscriber yet: a policy worker,
 * search service or trainer of its own process that starts after the run (or its rollout workers),
 * or restarts. A rollout keeps its command alive meanwhile (its worker's progress heartbeats), so
 * the wait costs no delivery attempt; a service that never comes still fails each attempt in a
 * minute, and the run's stall deadline (10 min) is later than a rollout's 5 attempts.
 */
export const SERVICE_START_WAIT_MS = 60_000;

export interface ResendOptions {
  /** How long "no responders" is asked again on a single server (default 0: fail at once). */
  waitForResponderMs?: number;
  /** Ends the request (and any wait for a responder) with the signal's reason. */
  signal?: AbortSignal;
}

/** `nc.request`, published again after each reconnect while no reply has arrived. */
export function requestResending(
  nc: NatsConnection,
  subject: string,
  data: Payload,
  timeoutMs: number,
  opts: ResendOptions = {},
): Promise<Msg> {
  const { waitForResponderMs = 0, signal } = opts;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<Msg>((resolve, reject) => {
    const inbox = createInbox();
    const started = Date.now();
    const noRespondersWindow = Math.max(electionWindowMs(nc), waitForResponderMs);
    let noResponderWait = 250;
    let retryTimer: ReturnType<typeof setTimeout> | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let done = false;
    const finish = (err: Error | null, msg?: Msg) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(retryTimer);
      stopWatching();
      signal?.removeEventListener('abort', onAbort);
      sub.unsubscribe();
      if (err) reject(err);
      else resolve(msg!);
    };
    const sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        if (err) return finish(err);
        // The server's "no responders" status: an empty message with code 503. On a cluster the
        // service may be reconnecting from a lost node (or still starting): ask again, backing
        // off, for up to the election window (or the caller's wait for a service that starts).
        // Nobody has the request meanwhile: its reply timeout starts again when it is sent again.
        if (msg.headers?.code === 503 && msg.data.length === 0) {
          if (Date.now() + noResponderWait > started + noRespondersWindow)
            return finish(new errors.NoRespondersError(subject));
          clearTimeout(timer);
          clearTimeout(retryTimer);
          retryTimer = setTimeout(() => {
            restartTimeout();
            send();
          }, noResponderWait);
          noResponderWait = Math.min(noResponderWait * 2, 2_000);
          return;
        }
        finish(null, msg);
      },
    });
    // As nats.js does for a plain request: a closed connection fails the request at once.
    void sub.closed.then(() => finish(new errors.ClosedConnectionError()));
    const restartTimeout = () => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(new errors.TimeoutError()), timeoutMs);
    };
    restartTimeout();
    const onAbort = () => finish(signal?.reason as Error);
    signal?.addEventListener('abort', onAbort, { once: true });
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
