/**
 * The `akbe` a user gets. The working tree is packed with `npm pack` (which builds it), extracted,
 * and its bin is run the ways npm starts bins: through a `node_modules/.bin` symlink (npx), through a global
 * prefix's symlink to a linked package (npm link, npm install -g), by `node <link>` and by its
 * real path. Then every `akbe` command shown in README.md and docs/*.md is parsed against the CLI,
 * and run through that same bin, in a scratch directory, in the order a reader would type them.
 *
 * What runs as written, and what does not (each with its reason), is the PLAN table below; a
 * command added to the docs later is parsed and its `--help` is run until someone plans it.
 * NATS: one private nats-server for the whole session (NATS_URL), so nothing is left behind.
 */
import { execFile as execFileCb, spawn } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { parseFlags } from '../src/cli/command.js';
import { resolveCommand } from '../src/cli/main.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';

const execFile = promisify(execFileCb);

// A build, a pack and ~30 commands (two short trainings among them): about 3 minutes on an idle
// 2-core machine, 10 when nine other jobs share it; tap's default of 600 s would cut it there.
t.setTimeout(20 * 60_000);
const REPO = resolve('.');

// --- the commands the docs show -------------------------------------------------------------

/** `akbe ...` lines of the fenced code blocks of a markdown text, comments and `&` removed. */
export function docCommands(markdown: string): string[] {
  const found: string[] = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.trimStart().startsWith('```')) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) continue;
    const m = /^\s*(?:npx )?akbe (.*)$/.exec(line);
    if (!m) continue;
    const text = m[1]
      .replace(/\s+#.*$/, '')
      .replace(/\s*&\s*$/, '')
      .trim();
    found.push(`akbe ${text}`);
  }
  return found;
}

/**
 * One shown command's argv as a shell would split it: `[--opt x]` groups are optional (dropped),
 * `a|b` choices take the first.
 */
function argvOf(command: string): string[] {
  return command
    .replace(/\[[^\]]*\]/g, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .slice(1)
    .map((w) => (w.includes('|') && !w.startsWith('-') ? w.split('|')[0] : w));
}

const DOCS = ['README.md', ...readdirSync('docs').map((f) => join('docs', f))].filter((f) =>
  f.endsWith('.md'),
);

/**
 * How each shown command is run. `argv` (default: the command as shown) replaces placeholders or
 * shortens a long run, and `why` says so; `server` is a ready line after which SIGINT stops it;
 * `help` runs only `--help` (a long run; `why` says how long).
 */
interface Step {
  shown: string;
  argv?: string[];
  why?: string;
  server?: RegExp;
  help?: true;
  expect?: RegExp;
  /** The exit code (default 0). */
  code?: number;
}

const PLAN: Step[] = [
  { shown: 'akbe world build --seed 0 --out .akbe/world', expect: /436 entities/ },
  { shown: 'akbe policy info --checkpoint assets/base', expect: /parameters: \d+/ },
  { shown: 'akbe eval --checkpoint assets/base --world .akbe/world --split dev', expect: /EM/ },
  {
    shown: 'akbe world build --preset hard --seed 0 --out .akbe/world-hard',
    expect: /world hard seed 0 -> .*436 entities/,
  },
  {
    shown: 'akbe eval --checkpoint assets/base-hard --world .akbe/world-hard --temperature 0',
    argv: [
      'eval',
      '--checkpoint',
      'assets/base-hard',
      '--world',
      '.akbe/world-hard',
      '--temperature',
      '0',
      '--limit',
      '16',
    ],
    why: "the whole test split is ~10 s of this file; world-base.int checks the hard base's figures on a whole split, 16 questions run the same command",
    expect: /with-tool EM/,
  },
  {
    shown: 'akbe pretrain --world .akbe/world --out .akbe/base',
    argv: ['pretrain', '--world', '.akbe/world', '--out', '.akbe/base', '--steps', '2', '--batch', '8'],
    why: '2000 steps take ~8 min; 2 small steps make the .akbe/base the next command reads',
    expect: /pretrained to step 2/,
  },
  {
    shown: 'akbe eval --checkpoint .akbe/base --world .akbe/world --split dev --temperature 1 --seed 0',
    argv: [
      'eval',
      '--checkpoint',
      '.akbe/base',
      '--world',
      '.akbe/world',
      '--split',
      'dev',
      '--temperature',
      '1',
      '--seed',
      '0',
      '--limit',
      '8',
    ],
    why: 'the 2-step base above is untrained, so every rollout runs to its token limit: 8 questions',
    expect: /EM/,
  },
  {
    shown: 'akbe train --algo akbe --config configs/tiny.yaml --inspect',
    argv: [
      'train',
      '--algo',
      'akbe',
      '--config',
      'configs/tiny.yaml',
      '--inspect',
      '--inspect-port',
      '0',
      '--run-id',
      'r42',
    ],
    why: 'port 8080 may be taken on a shared machine (0 = a free one); the run is named r42 for the replay commands below',
    expect: /inspector: open .*\n[\s\S]*train: run r42 2 steps/,
  },
  {
    shown: 'akbe train --algo akbe --config configs/tiny.yaml --inspect --inspect-port 9000',
    help: true,
    why: 'the same run as the line above on a fixed port',
  },
  {
    shown: 'akbe train --config configs/default.yaml --run-id r1 [--algo grpo] [--inspect]',
    argv: ['train', '--config', 'configs/default.yaml', '--run-id', 'r1', '--steps', '1'],
    why: 'configs/default.yaml trains 4 steps of 96 rollouts (minutes on 2 cores); 1 step runs the same path',
    expect: /train: run r1 1 steps/,
  },
  {
    shown: 'akbe train --config configs/default.yaml --run-id r1',
    help: true,
    why: "the README's line above (docs/training.md)",
  },
  {
    shown: 'akbe train --resume --run-id r1',
    why: 'r1 finished, so there is nothing to resume: a one-line error (test/resume-crash.int.test.ts resumes a crashed run)',
    code: 1,
    expect: /run r1: is already finished/,
  },
  { shown: 'akbe runs', expect: /r1\s+completed/ },
  {
    shown: 'akbe events tail --run r1',
    server: /run\.finished/,
    why: 'follows the log live until Ctrl-C',
  },
  { shown: 'akbe replay --run r1', expect: /clean/ },
  { shown: 'akbe replay --run r1 --verify-training', expect: /verified training: 1 step re-derived from v0/ },
  {
    shown: 'akbe replay --run r1 --question Q',
    argv: ['replay', '--run', 'r1', '--question', '<a question of r1>'],
    why: 'Q stands for a question id of the run',
  },
  { shown: 'akbe events export --run r1 --format jsonl', expect: /"type":"run\.started"/ },
  {
    shown: 'akbe worker --run-id r1 --role rollout',
    why: 'r1 has finished, so the worker stops at once instead of serving',
  },
  {
    shown: 'akbe index build --corpus FILE --embedder lexical|e5 --out DIR',
    argv: [
      'index',
      'build',
      '--corpus',
      '.akbe/world/corpus.jsonl',
      '--embedder',
      'lexical',
      '--out',
      '.akbe/index',
    ],
    why: 'FILE and DIR are placeholders (the world corpus is a Search-R1 JSONL corpus)',
  },
  {
    shown: 'akbe index serve --index DIR --http 8000',
    argv: ['index', 'serve', '--index', '.akbe/index', '--http', '0'],
    why: 'DIR is a placeholder; port 8000 may be taken (0 = a free one); serves until Ctrl-C',
    server: /serving .akbe\/index/,
  },
  {
    shown: 'akbe replay --run r42 --inspect',
    argv: ['replay', '--run', 'r42', '--inspect', '--inspect-port', '0'],
    why: 'port 8080 may be taken on a shared machine',
    expect: /r42/,
  },
  {
    shown: 'akbe replay --run r42 --inspect --inspect-port 0 --inspect-hold 600',
    argv: ['replay', '--run', 'r42', '--inspect', '--inspect-port', '0', '--inspect-hold', '1'],
    why: 'holds the relay 600 s for a browser; 1 s here',
    expect: /r42/,
  },
  { shown: 'akbe replay --run r42', expect: /clean/ },
  { shown: 'akbe replay --run r42 --json', expect: /"mismatches":\[\]/ },
  { shown: 'akbe replay --run r42 --rerun', expect: /identical to the log/ },
  {
    shown: 'akbe replay --run r42 --question q17',
    argv: ['replay', '--run', 'r42', '--question', '<a question of r42>'],
    why: 'q17 stands for a question id of the run',
  },
  { shown: 'akbe events export --run r42 --out r42.jsonl' },
  { shown: 'akbe replay --file r42.jsonl', expect: /clean/ },
  {
    shown: 'akbe train --config configs/default.yaml --run-id r1 --no-workers',
    help: true,
    why: 'a cluster recipe (three nats-servers and four processes); test/cluster-kill.int.test.ts runs it',
  },
  {
    shown: 'akbe worker --run-id r1 --role policy,search,trainer',
    help: true,
    why: 'part of the cluster recipe',
  },
  {
    shown: 'akbe worker --run-id r1 --role rollout --concurrency 16',
    help: true,
    why: 'part of the cluster recipe',
  },
];

// --- running the packed bin -----------------------------------------------------------------

interface Ran {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `file args` to its end, or, with `ready`, until a line matches and then SIGINT. */
function run(
  file: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; ready?: RegExp; timeoutMs?: number },
): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(
        new Error(`${file} ${args.join(' ')}: no end after ${opts.timeoutMs ?? 180_000} ms\n${out}\n${err}`),
      );
    }, opts.timeoutMs ?? 180_000);
    const check = () => {
      if (opts.ready?.test(out + err) && !child.killed) child.kill('SIGINT');
    };
    child.stdout.on('data', (d) => {
      out += d;
      check();
    });
    child.stderr.on('data', (d) => {
      err += d;
      check();
    });
    child.once('error', fail);
    child.once('exit', (code) => {
      clearTimeout(timer);
      done({ code, out, err });
    });
  });
}

/**
 * Packs the working tree as a publisher would (`npm pack` runs `prepack`, i.e. `npm run build`)
 * and extracts the tarball; returns the extracted package's folder.
 */
async function packedPackage(tmp: string): Promise<string> {
  const stage = join(tmp, 'stage');
  const { stdout } = await execFile('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: REPO,
  });
  for (const f of stdout.split('\0').filter(Boolean))
    if (existsSync(join(REPO, f))) cpSync(join(REPO, f), join(stage, f), { recursive: true });
  symlinkSync(join(REPO, 'node_modules'), join(stage, 'node_modules'));
  await execFile('npm', ['pack', '--pack-destination', tmp], { cwd: stage, maxBuffer: 64 << 20 });
  const tarball = readdirSync(tmp).find((f) => f.endsWith('.tgz'));
  if (!tarball) throw new Error(`npm pack wrote no tarball into ${tmp}`);
  mkdirSync(join(tmp, 'x'));
  await execFile('tar', ['-xzf', join(tmp, tarball), '-C', join(tmp, 'x')]);
  const pkg = join(tmp, 'x', 'package');
  // An install puts the dependencies beside the package and marks its bin executable.
  symlinkSync(join(REPO, 'node_modules'), join(pkg, 'node_modules'));
  const bin = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')).bin.akbe as string;
  chmodSync(join(pkg, bin), 0o755);
  return pkg;
}

t.test('the packed akbe bin and every command the docs show', async (t) => {
  const tmp = await mkdtemp(join(tmpdir(), 'akbe-docs-'));
  t.teardown(() => rm(tmp, { recursive: true, force: true }));
  const pkg = await packedPackage(tmp);
  const main = join(pkg, JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')).bin.akbe);
  t.ok(existsSync(join(pkg, 'assets/base/model.safetensors')), 'the package ships the default base');

  // A project with akbe installed (npx akbe): node_modules/.bin/akbe -> ../akbe/<bin>.
  const proj = join(tmp, 'proj');
  mkdirSync(join(proj, 'node_modules/.bin'), { recursive: true });
  cpSync(join(REPO, 'package.json'), join(proj, 'package.json'));
  symlinkSync(pkg, join(proj, 'node_modules/akbe'));
  symlinkSync(
    join('..', 'akbe', JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')).bin.akbe),
    join(proj, 'node_modules/.bin/akbe'),
  );
  // A global prefix (npm install -g, npm link): bin/akbe -> ../lib/node_modules/akbe/<bin>, itself a link.
  const prefix = join(tmp, 'global');
  mkdirSync(join(prefix, 'lib/node_modules'), { recursive: true });
  mkdirSync(join(prefix, 'bin'));
  symlinkSync(pkg, join(prefix, 'lib/node_modules/akbe'));
  symlinkSync('../lib/node_modules/akbe/dist/src/cli/main.js', join(prefix, 'bin/akbe'));
  const globalBin = join(prefix, 'bin/akbe');

  const env = { ...process.env, NODE_OPTIONS: '', CI: '1' };
  await t.test('the bin prints its help however it is started', async (t) => {
    const ways: Array<[string, string, string[], string]> = [
      ['npx (a node_modules/.bin link)', 'npx', ['--offline', 'akbe', '--help'], proj],
      ['a global or linked bin (two links)', globalBin, ['--help'], tmp],
      ['node <link>', process.execPath, [globalBin, '--help'], tmp],
      ['node <real path>', process.execPath, [main, '--help'], tmp],
    ];
    for (const [how, file, args, cwd] of ways) {
      const r = await run(file, args, { cwd, env, timeoutMs: 60_000 });
      t.equal(r.code, 0, `${how}: exit 0`);
      t.match(r.out, /^usage: akbe <command> \[flags\]/, `${how}: the overview on stdout`);
      t.notMatch(r.err, /npm warn/, `${how}: no npm warnings`);
    }
  });

  await t.test('every subpath export imports from the installed package', async (t) => {
    // A user's project of its own name (proj copies akbe's package.json, where 'akbe' would
    // resolve to itself) with akbe installed: each entry by name, so a broken exports map or a
    // missing built file fails here.
    const user = join(tmp, 'user');
    mkdirSync(join(user, 'node_modules'), { recursive: true });
    writeFileSync(join(user, 'package.json'), '{"name": "user", "type": "module", "private": true}\n');
    symlinkSync(pkg, join(user, 'node_modules/akbe'));
    const probe = [
      "const want = { akbe: 'labelBoundary', 'akbe/rl': 'registerAlgorithm', 'akbe/events': 'decodeEvent',",
      "  'akbe/machines': 'rolloutInputs', 'akbe/tools': 'registerTool' };",
      'for (const [spec, name] of Object.entries(want)) {',
      '  const m = await import(spec);',
      "  if (typeof m[name] !== 'function') throw new Error(spec + ' lacks ' + name);",
      '  console.log(spec, Object.keys(m).length);',
      '}',
    ].join('\n');
    const r = await run(process.execPath, ['--input-type=module', '-e', probe], {
      cwd: user,
      env,
      timeoutMs: 60_000,
    });
    t.equal(r.code, 0, r.err);
    t.match(r.out, /^akbe \d+\nakbe\/rl \d+\nakbe\/events \d+\nakbe\/machines \d+\nakbe\/tools \d+\n$/);
  });

  await t.test(
    "npm in the repository warns of no unknown config and never runs onnxruntime-node's CUDA download",
    async (t) => {
      // The variable keeps a regression from downloading anything: the banner is the evidence.
      const r = await execFile('npm', ['rebuild', 'onnxruntime-node', '--foreground-scripts'], {
        cwd: REPO,
        env: { ...env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
      });
      t.notMatch(r.stdout + r.stderr, /script\/install/, 'the install script did not run');
      t.notMatch(r.stderr, /Unknown (project|user|env) config/, 'no warnings about the project config');
    },
  );

  const shown = new Map<string, string>();
  for (const file of DOCS)
    for (const c of docCommands(readFileSync(file, 'utf8'))) if (!shown.has(c)) shown.set(c, file);

  t.test('every command the docs show names a real command with real flags', async (t) => {
    t.ok(shown.size >= 25, `found ${shown.size} commands`);
    for (const [c, file] of shown) {
      const { spec, rest } = resolveCommand(argvOf(c));
      if (!spec) {
        t.fail(`${file}: '${c}' is no akbe command`);
        continue;
      }
      t.doesNotThrow(() => parseFlags(spec, rest), `${file}: ${c}`);
    }
  });

  await t.test('the commands run as written (or as the plan says, with its reason)', async (t) => {
    const nats = await withNats(t);
    const cwd = join(tmp, 'work');
    mkdirSync(cwd);
    for (const d of ['assets', 'configs']) symlinkSync(join(pkg, d), join(cwd, d));
    const runEnv = { ...env, NATS_URL: nats.server.url };
    const questionOf = async (runId: string) => {
      const r = await run(globalBin, ['events', 'export', '--run', runId, '--format', 'jsonl'], {
        cwd,
        env: runEnv,
      });
      return /"questionId":"([^"]+)"/.exec(r.out)?.[1] ?? 'none';
    };
    for (const step of PLAN) {
      t.ok(shown.has(step.shown), `the docs still show: ${step.shown}`);
      let argv = step.help ? [...argvOf(step.shown), '--help'] : (step.argv ?? argvOf(step.shown));
      const placeholder = argv.find((a) => /^<a question of (.+)>$/.test(a));
      if (placeholder) {
        const id = await questionOf(/of (\w+)>/.exec(placeholder)![1]);
        argv = argv.map((a) => (a === placeholder ? id : a));
      }
      const r = await run(globalBin, argv, { cwd, env: runEnv, ready: step.server });
      const said = `${r.out}${r.err}`;
      const name = `akbe ${argv.join(' ')}${step.why ? ` (${step.why})` : ''}`;
      if (step.server) t.match(said, step.server, `${name}: ready`);
      else t.equal(r.code, step.code ?? 0, `${name}: exit ${step.code ?? 0}`, { output: said.slice(-600) });
      if (step.expect) t.match(said, step.expect, `${name}: output`);
    }
    const unplanned = [...shown.keys()].filter((c) => !PLAN.some((s) => s.shown === c));
    // In this process (main(), as test/helpers/cli.ts runs it): the planned commands above have
    // shown the packed bin starts; a child per --help cost ~1 s of start-up each, 31 of them.
    for (const c of unplanned) {
      t.comment(`not planned yet, --help only: ${c}`);
      const r = await runCli(...argvOf(c), '--help');
      t.equal(r.code, 0, `${c} --help`);
    }
  });
});
