// Module hooks that run the TypeScript sources directly: `.js` specifiers resolve to the `.ts`
// beside them (NodeNext style imports), and `.ts` files are stripped of types by esbuild with an
// inline source map, so stack traces and v8 coverage point at .ts lines. Stripped output is
// cached on disk by the sha256 of the source, so a second run transforms nothing.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transform, version } from 'esbuild';

const cacheDir = join(fileURLToPath(new URL('../../', import.meta.url)), 'node_modules/.cache/akbe-ts');

export async function resolve(specifier, context, next) {
  if (/^\.{1,2}\//.test(specifier) && specifier.endsWith('.js') && context.parentURL?.startsWith('file:')) {
    const url = new URL(specifier, context.parentURL);
    if (!existsSync(url)) {
      const ts = new URL(url.href.replace(/\.js$/, '.ts'));
      if (existsSync(ts)) return next(ts.href, context);
    }
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.startsWith('file:') || !/\.[mc]?ts$/.test(url)) return next(url, context);
  const file = fileURLToPath(url);
  const source = readFileSync(file, 'utf8');
  const key = createHash('sha256')
    .update(`${version}\0v1\0`)
    .update(file)
    .update('\0')
    .update(source)
    .digest('hex');
  const cached = join(cacheDir, `${key}.js`);
  if (existsSync(cached)) {
    return { format: 'module', source: readFileSync(cached, 'utf8'), shortCircuit: true };
  }
  const out = await transform(source, {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: 'inline',
    sourcefile: file,
  });
  mkdirSync(cacheDir, { recursive: true });
  // Write then rename: parallel test processes never read a half-written entry.
  const tmp = `${cached}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  writeFileSync(tmp, out.code);
  renameSync(tmp, cached);
  return { format: 'module', source: out.code, shortCircuit: true };
}
