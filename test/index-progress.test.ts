import { PassThrough } from 'node:stream';
import t from 'tap';
import { Progress } from '../src/util/progress.js';

function sink(isTTY: boolean) {
  const s = Object.assign(new PassThrough(), { isTTY, columns: 80 });
  let text = '';
  s.on('data', (c) => (text += c));
  return { s, text: () => text };
}

t.test('without a TTY it prints whole lines, at most one per interval, and a final line', async (t) => {
  let now = 0;
  const { s, text } = sink(false);
  const p = new Progress('indexing', { total: 100, stream: s, intervalMs: 1000, now: () => now });
  p.tick(10); // first tick draws
  now = 500;
  p.tick(10); // too soon
  now = 2000;
  p.tick(30);
  p.finish();
  p.finish();
  t.same(text().split('\n'), [
    'indexing [##......................] 10.0% 10/100 ?/s eta ?',
    'indexing [############............] 50.0% 50/100 25.0/s eta 2s',
    'indexing [############............] 50.0% 50/100 25.0/s eta 2s',
    '',
  ]);
});

t.test('on a TTY it redraws one line with carriage returns and ends it on finish', async (t) => {
  let now = 0;
  const { s, text } = sink(true);
  const p = new Progress('scan', { stream: s, now: () => now });
  p.tick(5);
  now = 1000;
  p.tick(5);
  p.finish();
  t.match(text(), /^\rscan 5 \?\/s 0\.0s *\rscan 10 10\.0\/s 1\.0s *\rscan 10 10\.0\/s 1\.0s *\n$/);
});
