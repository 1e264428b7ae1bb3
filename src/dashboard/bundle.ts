/**
 * Builds the dashboard's browser bundle with esbuild: web/dashboard/main.ts (preact + htm, uPlot,
 * elkjs, all from node_modules) into `<outDir>/app.js` + `app.css`, and the page `index.html`.
 * `npm run build` runs it after tsc (into dist/dashboard, which the package ships); the dashboard
 * test builds into a temp dir. Nothing is loaded from a CDN at run time.
 *
 *   node dist/src/dashboard/bundle.js [OUT_DIR]
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The akbe package root above this file (from src/ in tests, dist/src/ when built or installed). */
export function packageRoot(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).name === 'akbe') return dir;
    if (dirname(dir) === dir) throw new Error(`no akbe package.json above ${from}`);
  }
}

/** Where `npm run build` puts the bundle and where `akbe dashboard` serves it from. */
export function defaultAssetsDir(): string {
  return join(packageRoot(), 'dist', 'dashboard');
}

export async function buildDashboardAssets(
  outDir = defaultAssetsDir(),
): Promise<{ outDir: string; bytes: number }> {
  // esbuild is a build tool (npm run build): loaded only when assets are built, never to serve.
  const { build } = await import('esbuild');
  const web = join(packageRoot(), 'web', 'dashboard');
  mkdirSync(outDir, { recursive: true });
  const result = await build({
    entryPoints: [join(web, 'main.ts')],
    bundle: true,
    format: 'esm',
    target: 'es2022',
    minify: true,
    sourcemap: false,
    outfile: join(outDir, 'app.js'),
    metafile: true,
    logLevel: 'warning',
  });
  copyFileSync(join(web, 'index.html'), join(outDir, 'index.html'));
  const bytes = Object.values(result.metafile.outputs).reduce((a, o) => a + o.bytes, 0);
  return { outDir, bytes };
}

if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))) {
  const out = resolve(process.argv[2] ?? defaultAssetsDir());
  const { bytes } = await buildDashboardAssets(out);
  process.stdout.write(`dashboard bundle: ${out} (${(bytes / 1024).toFixed(0)} KiB)\n`);
}
