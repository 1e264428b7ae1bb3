import t from 'tap';
import { startWorker } from '../src/util/worker-url.js';

t.test('startWorker runs the TypeScript sibling of a TypeScript caller', async (t) => {
  const w = startWorker(new URL('./fixtures/caller.ts', import.meta.url).href, 'echo-worker');
  const reply = await new Promise((resolve) => {
    w.once('message', resolve);
    w.postMessage(21);
  });
  t.equal(reply, 42);
  await w.terminate();
});
