import t from 'tap';
import {
  type CommandContext,
  type CommandSpec,
  choiceFlag,
  intFlag,
  parseFlags,
  UsageError,
} from '../src/cli/command.js';
import { main } from '../src/cli/main.js';
import { capture } from './helpers/cli.js';

const spec: CommandSpec = {
  path: ['demo-test'],
  summary: 'a test command',
  flags: {
    steps: { type: 'string', description: 'steps', value: 'N' },
    device: { type: 'string', description: 'device' },
  },
  run: async () => 0,
};

t.test('an unknown flag is a UsageError naming the flag', async (t) => {
  t.throws(() => parseFlags(spec, ['--stepz', '3']), { name: 'UsageError', message: /unknown flag --stepz/ });
});

t.test('typed flag readers name the flag and the bad value', async (t) => {
  const ctx = { flags: { steps: 'three', device: 'tpu' }, positionals: [] } as unknown as CommandContext;
  t.throws(() => intFlag(ctx, 'steps'), new UsageError("--steps must be an integer, got 'three'"));
  t.throws(() => choiceFlag(ctx, 'device', ['cpu', 'cuda']), /--device must be one of cpu\|cuda, got 'tpu'/);
  const ok = { flags: { steps: '4' }, positionals: [] } as unknown as CommandContext;
  t.equal(intFlag(ok, 'steps', { min: 1 }), 4);
  t.throws(() => intFlag(ok, 'steps', { max: 3 }), /--steps must be <= 3, got 4/);
});

t.test('main: unknown command exits 2 with one line; --help exits 0', async (t) => {
  const c = capture();
  t.equal(await main(['no-such-command'], c.out, c.err), 2);
  t.match(c.text().err, /^akbe: unknown command 'no-such-command'/);
  t.equal(c.text().err.trim().split('\n').length, 1);
  const h = capture();
  t.equal(await main(['--help'], h.out, h.err), 0);
  t.match(h.text().out, /usage: akbe <command>/);
});
