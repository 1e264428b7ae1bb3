/**
 * The package's public API: the subpath exports of package.json and their entry modules. Every
 * name an entry exports carries JSDoc (read by the TypeScript checker from the declaration it
 * resolves to), and the exports map names exactly the entries below. That each entry imports
 * from the packed package is checked in docs-commands.int.test.ts, which packs it anyway.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import ts from 'typescript';

export const ENTRIES: Record<string, string> = {
  '.': 'src/index.ts',
  './rl': 'src/rl/public-api.ts',
  './events': 'src/events/public-api.ts',
  './machines': 'src/machines/public-api.ts',
  './tools': 'src/tools/public-api.ts',
};

/** The exported names of `file` whose declaration has no JSDoc text. */
export function undocumentedExports(
  program: ts.Program,
  file: string,
): { names: string[]; missing: string[] } {
  const checker = program.getTypeChecker();
  const mod = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  const names: string[] = [];
  const missing: string[] = [];
  for (const s of checker.getExportsOfModule(mod)) {
    const real = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
    names.push(s.name);
    if (!ts.displayPartsToString(real.getDocumentationComment(checker)).trim()) missing.push(s.name);
  }
  return { names, missing };
}

const compile = (files: string[]) =>
  ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    skipLibCheck: true,
  });

t.test('package.json exports exactly the entries, each built from its module', async (t) => {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
    exports: Record<string, { types: string; import: string }>;
  };
  t.same(Object.keys(pkg.exports).sort(), Object.keys(ENTRIES).sort());
  for (const [sub, src] of Object.entries(ENTRIES)) {
    const built = `./dist/${src.replace(/\.ts$/, '')}`;
    t.same(pkg.exports[sub], { types: `${built}.d.ts`, import: `${built}.js` }, sub);
  }
});

t.test('every export of every entry has JSDoc', async (t) => {
  const program = compile(Object.values(ENTRIES));
  for (const [sub, file] of Object.entries(ENTRIES)) {
    const { names, missing } = undocumentedExports(program, file);
    t.ok(names.length >= 8, `${sub}: ${names.length} exports`);
    t.same(missing, [], `${sub}: exports without JSDoc`);
  }
});

t.test('the JSDoc check sees an undocumented export, direct and re-exported', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-api-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'a.ts'), '/** documented */\nexport const a = 1;\nexport const bare = 2;\n');
  const entry = join(dir, 'entry.ts');
  writeFileSync(
    entry,
    "export { a, bare } from './a.js';\n/** local */\nexport function f() {}\nexport type T = 1;\n",
  );
  const { names, missing } = undocumentedExports(compile([entry]), entry);
  t.same(names.sort(), ['T', 'a', 'bare', 'f']);
  t.same(missing.sort(), ['T', 'bare']);
});
