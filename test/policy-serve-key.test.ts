/**
 * Issue 23 item 6: `akbe policy serve --api-key-file` refuses a key file other users may read
 * (0644) before it serves anything, naming the file's mode and the fix; a 0600 file gets past the
 * check (the run then fails on the missing checkpoint, which shows the key was accepted).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { main } from '../src/cli/main.js';

const dir = mkdtempSync(join(tmpdir(), 'akbe-api-key-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const serve = async (keyFile: string) => {
  let err = '';
  const e = new PassThrough().on('data', (c) => (err += c));
  const args = [
    'policy',
    'serve',
    '--checkpoint',
    join(dir, 'no-such-policy'),
    '--api-key-file',
    keyFile,
    '--http',
    '0',
  ];
  const code = await main(args, new PassThrough(), e);
  return { code, err };
};

t.test('a 0644 key file is refused; a 0600 one is read', async (t) => {
  const key = join(dir, 'key');
  writeFileSync(key, 'secret\n');
  chmodSync(key, 0o644); // whatever the umask: the mode under test
  const open = await serve(key);
  t.equal(open.code, 2, open.err);
  t.match(open.err, /--api-key-file: .*has mode 0644: others may read it; chmod 600/);
  chmodSync(key, 0o600);
  const ok = await serve(key);
  t.notMatch(ok.err, /api-key-file/, `the key passed: ${ok.err.trim()}`);
  t.not(ok.code, 0, 'and the missing policy still fails the command');
});
