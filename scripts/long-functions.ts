/**
 * Functions over 80 lines in src/ and web/ (house rule: functions under 80 lines, unless a comment
 * says why one must not be split). Reads each TypeScript file with the compiler's parser and
 * measures every function declaration, method, accessor, constructor, function expression and
 * arrow function from its first token to its last (a nested function counts in its parent too).
 * A function is excused by a `// long: <why>` comment among its leading comments (or those of the
 * statement declaring it: `// long: ...` above `const f = () => {...}`).
 *
 *   node --import=./test/helpers/ts-register.mjs scripts/long-functions.ts [--all] [--max N]
 *
 * prints `lines  file:line  name` longest first (excused ones only with --all, marked `long:`);
 * test/long-functions.test.ts fails on a long function that is neither excused nor known.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

export const MAX_LINES = 80;

export interface LongFunction {
  file: string;
  line: number;
  name: string;
  lines: number;
  /** The `// long:` reason, when one excuses it. */
  excuse?: string;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : tsFiles(p);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** A readable name: the declaration's, the variable or property it is assigned to, else `(anonymous)`. */
function nameOf(n: ts.SignatureDeclaration, sf: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(n)) return `${className(n)}constructor`;
  if (n.name)
    return `${ts.isMethodDeclaration(n) || ts.isAccessor(n) ? className(n) : ''}${n.name.getText(sf)}`;
  const p = n.parent;
  if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p))
    return p.name.getText(sf);
  if (ts.isCallExpression(p)) return `(callback of ${p.expression.getText(sf).slice(0, 40)})`;
  return '(anonymous)';
}

function className(n: ts.Node): string {
  const c = n.parent;
  return ts.isClassLike(c) && c.name ? `${c.name.text}.` : '';
}

/** The `// long:` reason in the leading comments of `n` or of the statement that declares it. */
function excuseOf(n: ts.Node, text: string): string | undefined {
  let at: ts.Node | undefined = n;
  for (let k = 0; at && k < 4; k++, at = at.parent) {
    for (const c of ts.getLeadingCommentRanges(text, at.getFullStart()) ?? []) {
      const m = /^\/\/\s*long:\s*(.+)$/m.exec(text.slice(c.pos, c.end));
      if (m) return m[1].trim();
    }
    if (ts.isStatement(at) || ts.isClassElement(at) || ts.isPropertyAssignment(at)) break;
  }
  return undefined;
}

/** Every function of one file longer than `max` lines. */
export function longFunctionsIn(file: string, text: string, max = MAX_LINES): LongFunction[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const found: LongFunction[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isFunctionLike(n) && (n as ts.FunctionLikeDeclaration).body) {
      const start = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
      const lines = sf.getLineAndCharacterOfPosition(n.getEnd()).line - start + 1;
      if (lines > max) {
        const excuse = excuseOf(n, text);
        found.push({
          file,
          line: start + 1,
          name: nameOf(n as ts.SignatureDeclaration, sf),
          lines,
          ...(excuse ? { excuse } : {}),
        });
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** Every function over `max` lines under `dirs` (relative to `root`), longest first. */
export function longFunctions(
  root: string,
  dirs: readonly string[] = ['src', 'web'],
  max = MAX_LINES,
): LongFunction[] {
  return dirs
    .flatMap((d) => tsFiles(join(root, d)))
    .flatMap((f) => longFunctionsIn(relative(root, f), readFileSync(f, 'utf8'), max))
    .sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const maxAt = args.indexOf('--max');
  const max = maxAt >= 0 ? Number(args[maxAt + 1]) : MAX_LINES;
  const all = args.includes('--all');
  const found = longFunctions(join(import.meta.dirname, '..'), ['src', 'web'], max);
  const shown = all ? found : found.filter((f) => !f.excuse);
  for (const f of shown)
    console.log(
      `${String(f.lines).padStart(4)}  ${f.file}:${f.line}  ${f.name}${f.excuse ? `  (long: ${f.excuse})` : ''}`,
    );
  console.log(
    `${shown.length} function(s) over ${max} lines${all ? '' : ` (${found.length - shown.length} excused)`}`,
  );
}
