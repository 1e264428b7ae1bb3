/**
 * scripts/gpu-check.sh's CPU-only paths: on a machine without a GPU it says SKIP with the reason
 * and exits 2 at once; where a GPU is seen but the Vulkan loader or the runtime is missing it
 * fails with one line naming what is missing (never a hang); and the stages of
 * scripts/gpu-check.ts, bundled as scripts/gpu-fetch-loader.sh bundles them, run as a CPU-against-
 * CPU dry run.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import t from 'tap';

const root = new URL('..', import.meta.url).pathname;
const script = join(root, 'scripts/gpu-check.sh');
const hasGpu = existsSync('/dev/nvidia0') || spawnSync('sh', ['-c', 'command -v nvidia-smi']).status === 0;

t.test('no GPU here: one SKIP line with the reason, exit 2, at once', { skip: hasGpu }, async (t) => {
  const t0 = performance.now();
  const r = spawnSync('bash', [script], { encoding: 'utf8', timeout: 30_000 });
  t.equal(r.status, 2, `exit code (stderr: ${r.stderr})`);
  t.equal(r.stdout, 'SKIP: no GPU here (nvidia-smi absent, no /dev/nvidia*)\n');
  t.ok(performance.now() - t0 < 10_000, 'answers without building or loading anything');
});

t.test('a GPU but nothing to run with: one FAIL line naming what is missing, exit 1', async (t) => {
  // A copy of the script alone (no .gl/, no node_modules) and an nvidia-smi on PATH that answers.
  const dir = mkdtempSync(join(tmpdir(), 'akbe-gpu-check-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'scripts'));
  mkdirSync(join(dir, 'bin'));
  copyFileSync(script, join(dir, 'scripts/gpu-check.sh'));
  writeFileSync(join(dir, 'bin/nvidia-smi'), '#!/bin/sh\necho 1024\n');
  chmodSync(join(dir, 'bin/nvidia-smi'), 0o755);
  const vulkan = spawnSync('sh', ['-c', 'ldconfig -p | grep -q libvulkan.so.1']).status === 0;
  const r = spawnSync('bash', [join(dir, 'scripts/gpu-check.sh')], {
    encoding: 'utf8',
    timeout: 30_000,
    env: {
      ...process.env,
      PATH: `${join(dir, 'bin')}:${process.env.PATH}`,
      GPU_CHECK_LOGS: join(dir, 'logs'),
    },
  });
  t.equal(r.status, 1, `exit code (stderr: ${r.stderr})`);
  const want = vulkan
    ? 'gpu-check: FAIL no node_modules and no .gl/akbe-runtime.tar.xz: run scripts/gpu-fetch-loader.sh here, then carry .gl\n'
    : 'gpu-check: FAIL no Vulkan loader (libvulkan.so.1) and no .gl/*.deb: run scripts/gpu-fetch-loader.sh where there is network, then carry .gl\n';
  t.equal(r.stdout, want);
});

t.test('the stages, bundled as the GPU machine runs them, as a CPU dry run', async (t) => {
  // Inside the repository, so the bundle resolves onnxruntime-node from its node_modules.
  const out = join(root, '.tap', `gpu-check-bundle-${process.pid}.mjs`);
  t.teardown(() => rmSync(out, { force: true }));
  await build({
    entryPoints: [join(root, 'scripts/gpu-check.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['onnxruntime-node'],
    outfile: out,
    logLevel: 'warning',
  });
  const stage = (...args: string[]) =>
    spawnSync('node', [out, '--device', 'cpu', ...args], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  const parity = stage('--stage', 'parity');
  t.equal(parity.status, 0, parity.stderr);
  t.equal(
    parity.stdout,
    'parity: max|dlogprob|=0.0e+0 over 4 tiny models\n',
    'CPU against CPU: no difference',
  );
  const train = stage('--stage', 'train');
  t.equal(train.status, 0, train.stderr);
  t.equal(train.stdout, 'train: tiny step |dloss|=0.0e+0 |dlogprob after|=0.0e+0\n');
  const bad = stage('--stage', 'nope');
  t.equal(bad.status, 1);
  t.equal(
    bad.stdout,
    "nope: FAIL --stage must be probe, parity, half, train, decode or train-speed, got 'nope'\n",
  );
});
