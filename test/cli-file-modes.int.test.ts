/**
 * The `akbe` process creates what it writes for the user alone (issue 23 item 5): a world built
 * by the real CLI process, whatever umask its parent had, is folders 0700 and files 0600.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startCli } from './helpers/cli-process.js';

t.test('a world built by akbe is readable by its user only', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-modes-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'world');
  const before = process.umask(0o022); // a permissive parent: the child's own setting must win
  const cli = startCli(['world', 'build', '--seed', '0', '--out', out]);
  process.umask(before);
  t.equal(await cli.exited, 0, cli.output());
  const modes = new Map<string, number>();
  const walk = (p: string) => {
    modes.set(p, statSync(p).mode & 0o777);
    if (statSync(p).isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
  };
  walk(out);
  t.ok(modes.size > 5, `${modes.size} paths`);
  for (const [p, mode] of modes) {
    const want = statSync(p).isDirectory() ? 0o700 : 0o600;
    if (mode !== want) t.fail(`${p}: mode ${mode.toString(8)}, want ${want.toString(8)}`);
  }
});
