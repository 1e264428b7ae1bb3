/**
 * The registry is the only place that knows an algorithm, loss term or row kind by name (issue 21,
 * item 3): everywhere else code reads what a registered entry says (its flags, rowKinds, trainer
 * needs), so a plugin's entry is treated like a built-in one. This reads every TypeScript file of
 * src/ and web/ with the compiler's parser (comments and docs do not count) and fails on a
 * registered name in a comparison (`===`, `!==`, `==`, `!=`, a `case`), a string test on it
 * (`startsWith`, `endsWith`, `includes`, `indexOf`, `match`) or a regular expression literal
 * spelling it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { listAlgorithms } from '../src/rl/algorithms/index.js';
import { listLosses } from '../src/rl/losses.js';
import { listRowKinds } from '../src/rl/row-kinds.js';

const ROOT = join(import.meta.dirname, '..');

/** The registries themselves, where each entry is defined under its name. */
const REGISTRY = ['src/rl/algorithms/', 'src/rl/losses.ts', 'src/rl/row-kinds.ts', 'src/rl/registry.ts'];

/** Comparisons that hold a registered name's spelling but are about something else. */
const ALLOWED: Record<string, string> = {
  "JSON.parse(readFileSync(pkg, 'utf8')).name === 'akbe'": 'the package name (src/dashboard/bundle.ts)',
};

const STRING_TESTS = new Set(['startsWith', 'endsWith', 'includes', 'indexOf', 'match']);

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : tsFiles(p);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** Each place in `text` where a name of `names` is compared or matched, as "line: source". */
export function nameComparisons(file: string, text: string, names: ReadonlySet<string>): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const found: string[] = [];
  const named = (n: ts.Node | undefined) => !!n && ts.isStringLiteralLike(n) && names.has(n.text);
  const report = (n: ts.Node) => {
    const src = n.getText(sf);
    if (ALLOWED[src]) return;
    found.push(`${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}: ${src}`);
  };
  const equality = new Set([
    ts.SyntaxKind.EqualsEqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsEqualsToken,
    ts.SyntaxKind.EqualsEqualsToken,
    ts.SyntaxKind.ExclamationEqualsToken,
  ]);
  const visit = (n: ts.Node): void => {
    if (ts.isBinaryExpression(n) && equality.has(n.operatorToken.kind) && (named(n.left) || named(n.right)))
      report(n);
    else if (ts.isCaseClause(n) && named(n.expression)) report(n.expression);
    else if (
      ts.isCallExpression(n) &&
      ts.isPropertyAccessExpression(n.expression) &&
      STRING_TESTS.has(n.expression.name.text) &&
      named(n.arguments[0])
    )
      report(n);
    else if (ts.isRegularExpressionLiteral(n) && [...names].some((name) => regexSpells(n.text, name)))
      report(n);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** A regex literal's pattern spells `name` as a word (`/akbe/i`, not `/^akbe\./` for subjects). */
function regexSpells(literal: string, name: string): boolean {
  const pattern = literal.slice(1, literal.lastIndexOf('/'));
  return new RegExp(`(^|[^\\w\\\\.-])${name.replace(/[-+]/g, '\\$&')}($|[^\\w\\\\.-])`, 'i').test(pattern);
}

const names = new Set([...listAlgorithms(), ...listLosses(), ...listRowKinds()]);

t.test('the registered names are the ones this test looks for', async (t) => {
  for (const n of ['grpo', 'akbe', 'dpo-akbe', 'offline-akbe', 'akbe-nll', 'dpo', 'akbe-target', 'dpo-pair'])
    t.ok(names.has(n), n);
});

t.test('no algorithm, loss or row-kind name is compared outside the registry', async (t) => {
  const files = [...tsFiles(join(ROOT, 'src')), ...tsFiles(join(ROOT, 'web'))];
  t.ok(files.length > 100, `${files.length} files read`);
  const bad: string[] = [];
  for (const f of files) {
    const rel = relative(ROOT, f);
    if (REGISTRY.some((r) => rel.startsWith(r))) continue;
    for (const hit of nameComparisons(rel, readFileSync(f, 'utf8'), names)) bad.push(`${rel}:${hit}`);
  }
  t.strictSame(bad, [], 'compare what the registered entry says, not its name');
});

t.test('the check sees each form of a comparison, and not a comment', async (t) => {
  const hits = (text: string) => nameComparisons('x.ts', text, names);
  t.equal(hits("if (algo === 'akbe') f();").length, 1, '===');
  t.equal(hits("if ('dpo' !== loss.name) f();").length, 1, '!== with the name on the left');
  t.equal(hits("switch (a) { case 'grpo': break; }").length, 1, 'case');
  t.equal(hits("if (name.startsWith('akbe')) f();").length, 1, 'startsWith');
  t.equal(hits('const akbe = /akbe/i.test(name);').length, 1, 'a regex spelling it');
  t.equal(hits("const d = { algo: 'akbe' }; // algo === 'akbe'").length, 0, 'a value or a comment');
  t.equal(hits('const subject = /^akbe\\./;').length, 0, 'a subject prefix is not the name');
  t.equal(hits("if (x === 'akbe-targets') f();").length, 0, 'another string');
});
