/**
 * The layering rules, read from the import statements of src/ (no file lists: folders may move).
 *
 * 1. NATS (`@nats-io/*` but nkeys, a signing library) and msgpackr only in src/events and
 *    src/actors (house style 6).
 * 2. The pure layers, src/machines and src/rl, and every module they import (transitively),
 *    touch no I/O and no clock: no NATS, onnxruntime, fs, child processes, sockets or worker
 *    threads, and no Date.now / new Date() / performance.now / setTimeout / setInterval.
 *    Time comes in on events and metadata; replay re-runs these layers without I/O.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';

/** Every module specifier a TypeScript text imports or re-exports, static or dynamic. */
export function importsOf(text: string): string[] {
  const code = stripComments(text);
  const out: string[] = [];
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g, // side-effect import
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g, // dynamic import, or import('x').Type
    /\brequire(?:\.resolve)?\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) out.push(m[1]);
  return out;
}

/** The clock reads and timers in a text (comments ignored). */
export function clockUsesOf(text: string): string[] {
  const code = stripComments(text);
  const re =
    /\b(Date\.now|performance\.now|setTimeout|setInterval|setImmediate)\s*\(|\bnew\s+Date\s*\(\s*\)/g;
  return [...code.matchAll(re)].map((m) => m[1] ?? 'new Date()');
}

/** Removes // and block comments, keeping string literals (import specifiers live in them). */
function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\/|(^|[^:'"`\\])\/\/.*$/gm, (_m, pre: string | undefined) => pre ?? '');
}

// @nats-io/nkeys is ed25519 signing in NATS's key format (src/audit signs exports with it); it
// opens no connection and carries no messages, so it is not "NATS" for rule 1.
const NATS = /^@nats-io\/(?!nkeys$)/;
const MSGPACK = /^msgpackr(\/|$)/;
const IO = [
  NATS,
  MSGPACK,
  /^onnxruntime-(node|web|common)(\/|$)/,
  /^hnswlib-node$/,
  /^(node:)?(fs|fs\/promises|child_process|net|http|https|dgram|worker_threads|perf_hooks|timers|timers\/promises)$/,
  /^ws$/,
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** A relative `.js` specifier -> the `.ts` file it names. */
function resolveLocal(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  return resolve(dirname(from), spec).replace(/\.js$/, '.ts');
}

/** Files reachable from `roots` through relative imports (roots included). */
function closure(roots: string[], importsByFile: Map<string, string[]>): Map<string, string> {
  const via = new Map<string, string>(roots.map((r) => [r, r]));
  const todo = [...roots];
  while (todo.length) {
    const f = todo.pop()!;
    for (const spec of importsByFile.get(f) ?? []) {
      const g = resolveLocal(f, spec);
      if (g && !via.has(g) && importsByFile.has(g)) {
        via.set(g, via.get(f)!);
        todo.push(g);
      }
    }
  }
  return via;
}

const SRC = resolve('src');
const rel = (f: string) => relative(resolve('.'), f);
const files = sourceFiles(SRC);
const texts = new Map(files.map((f) => [f, readFileSync(f, 'utf8')]));
const importsByFile = new Map(files.map((f) => [f, importsOf(texts.get(f)!)]));

t.test('the import scanner sees every form of import, and comments hide nothing', async (t) => {
  const sample = [
    "import { connect } from '@nats-io/transport-node';",
    "import type { Msg } from '@nats-io/nats-core';",
    "export { x } from './x.js';",
    'import {\n  a,\n  b,\n} from "./multi.js";',
    "import 'side-effect';",
    "const m = await import('msgpackr');",
    "type C = import('@nats-io/jetstream').JetStreamClient;",
    "const r = require('fs');",
    "// import { no } from 'commented-out';",
    "/* import { no2 } from 'blocked'; */",
  ].join('\n');
  t.same(importsOf(sample).sort(), [
    './multi.js',
    './x.js',
    '@nats-io/jetstream',
    '@nats-io/nats-core',
    '@nats-io/transport-node',
    'fs',
    'msgpackr',
    'side-effect',
  ]);
  t.same(
    clockUsesOf(
      'const a = Date.now();\nconst b = new Date();\nsetTimeout(f, 1);\n// Date.now()\nnew Date(x);',
    ),
    ['Date.now', 'new Date()', 'setTimeout'],
  );
});

t.test('NATS and msgpackr are imported only in src/events and src/actors', async (t) => {
  const allowed = [`${join(SRC, 'events')}/`, `${join(SRC, 'actors')}/`];
  let checked = 0;
  for (const [f, specs] of importsByFile) {
    if (allowed.some((a) => f.startsWith(a))) continue;
    checked++;
    for (const s of specs) if (NATS.test(s) || MSGPACK.test(s)) t.fail(`${rel(f)} imports ${s}`);
  }
  t.ok(checked > 50, `${checked} files outside events/ and actors/ checked`);
});

t.test('src/machines and src/rl, and all they import, do no I/O and read no clock', async (t) => {
  const roots = files.filter((f) => /\/src\/(machines|rl)\//.test(f));
  t.ok(roots.length >= 10, `${roots.length} pure modules`);
  const reached = closure(roots, importsByFile);
  for (const [f, root] of reached) {
    const why = f === root ? '' : ` (reached from ${rel(root)})`;
    for (const s of importsByFile.get(f)!) {
      if (IO.some((re) => re.test(s))) t.fail(`${rel(f)} imports ${s}${why}`);
      if (s.startsWith('.') && !resolveLocal(f, s)!.startsWith(SRC))
        t.fail(`${rel(f)} imports ${s} outside src`);
    }
    for (const c of clockUsesOf(texts.get(f)!)) t.fail(`${rel(f)} reads the clock: ${c}${why}`);
  }
  // The closure must reach past the roots (rl imports util/rng), or nothing transitive was checked.
  t.ok(reached.size > roots.length, `${reached.size} modules checked`);
});

/** The import cycles among `files`, `import type` included: a type-only cycle means a type sits
 * in the wrong file (the module that owns it imports its user). */
function cycles(files: string[]): string[][] {
  const edges = new Map(
    files.map((f) => [
      f,
      [
        ...stripComments(texts.get(f)!).matchAll(
          /^\s*(?:import|export)\s+[^;]*?from\s*['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/gm,
        ),
      ]
        .map((m) => resolveLocal(f, m[1] ?? m[2]))
        .filter((g): g is string => !!g && texts.has(g)),
    ]),
  );
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string) => {
    state.set(f, 'open');
    stack.push(f);
    for (const g of edges.get(f) ?? []) {
      if (state.get(g) === 'open') found.push(stack.slice(stack.indexOf(g)).map(rel));
      else if (!state.has(g)) visit(g);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of files) if (!state.has(f)) visit(f);
  return found;
}

t.test(
  'src has no import cycles, type-only included (each layer and op family imports downwards only)',
  async (t) => {
    t.same(cycles(files), []);
  },
);

t.test('the cycle finder sees a type-only cycle and a dynamic-import one', async (t) => {
  const a = join(SRC, '__a.ts');
  const b = join(SRC, '__b.ts');
  const c = join(SRC, '__c.ts');
  texts.set(a, "import type { B } from './__b.js';\nexport type A = B;");
  texts.set(b, "export type { A } from './__a.js';\nexport type B = 1;");
  texts.set(c, "export const c = () => import('./__c.js');");
  try {
    t.same(
      cycles([a, b, c]).map((cy) => cy.length),
      [2, 1],
    );
  } finally {
    for (const f of [a, b, c]) texts.delete(f);
  }
});

/**
 * The layers of src/, lowest first. A module may import from its own unit or from a unit on a
 * LOWER layer, never from its own layer's peers or above: the arrows all point down, so each
 * layer can be read, tested and replaced knowing only what lies beneath it. A unit is a folder of
 * src/, or a room of src/actors/ (its services/ counts as one). A new folder must be placed here.
 */
export const LAYERS: string[][] = [
  ['util'],
  ['rl', 'gpu', 'events'], // the algorithm, the compute core, the stored record: independent
  ['text', 'machines', 'retrieval', 'train'],
  ['audit', 'world', 'tools', 'serve', 'experiments'],
  ['dashboard', 'plugins'],
  ['actors/nats', 'actors/log'],
  ['actors/checkpoints'],
  ['actors/services'],
  ['actors/rollout'],
  ['actors/roles'],
  ['actors/inspect'],
  ['actors/orchestrator'],
  ['jobs'],
  ['cli'],
  ['index.ts'], // the package entry
];

/** The unit of a file under src/ (see LAYERS). */
export function unitOf(path: string): string {
  const parts = relative(SRC, path).split('/');
  if (parts.length === 1) return parts[0];
  if (parts[0] !== 'actors') return parts[0];
  return parts.length > 2 ? `actors/${parts[1]}` : 'actors';
}

/** The imports of `importsByFile` that run sideways or up the layers, as "from -> to" lines. */
export function upLayerImports(byFile: Map<string, string[]>): string[] {
  const layerOf = new Map(LAYERS.flatMap((units, i) => units.map((u) => [u, i] as const)));
  const bad: string[] = [];
  for (const [f, specs] of byFile) {
    const from = unitOf(f);
    const lf = layerOf.get(from);
    if (lf === undefined) {
      bad.push(`${rel(f)}: unit ${from} has no layer in LAYERS`);
      continue;
    }
    for (const s of specs) {
      const g = resolveLocal(f, s);
      if (!g?.startsWith(`${SRC}/`)) continue;
      const to = unitOf(g);
      if (to === from) continue;
      const lt = layerOf.get(to);
      if (lt === undefined || lt >= lf)
        bad.push(`${rel(f)} (${from}, layer ${lf}) -> ${rel(g)} (${to}, layer ${lt})`);
    }
  }
  return bad;
}

t.test('every import in src/ points down the layer table, type-only included', async (t) => {
  t.same(upLayerImports(importsByFile), []);
  t.ok(importsByFile.size > 200, `${importsByFile.size} files checked`);
});

t.test(
  'the layer check flags an import up a layer, sideways to a peer, and an unplaced folder',
  async (t) => {
    const f = (p: string) => join(SRC, p);
    const planted = new Map<string, string[]>([
      [f('rl/x.ts'), ['../machines/y.js']], // up: rl (1) -> machines (2)
      [f('gpu/x.ts'), ['../events/y.js']], // sideways: peers on layer 1
      [f('actors/rollout/x.ts'), ['../nats/y.js', '../../util/z.js']], // down: fine
      [f('newroom/x.ts'), ['../util/y.js']], // no layer
    ]);
    const bad = upLayerImports(planted);
    t.equal(bad.length, 3, bad.join('\n'));
    t.match(bad[0], /rl\/x\.ts \(rl, layer 1\) -> .*machines/);
    t.match(bad[1], /gpu\/x\.ts \(gpu, layer 1\) -> .*events/);
    t.match(bad[2], /unit newroom has no layer/);
  },
);
