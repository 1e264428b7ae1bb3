/**
 * An injected actor's work, cut short by its AbortSignal (xstate's fromPromise passes one: it fires
 * when the invoking state is left or the actor is stopped). The work itself is not cancelled (a
 * NATS request cannot be); its result is dropped and the actor rejects with the signal's reason.
 */
export function abortable<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
