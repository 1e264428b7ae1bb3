/**
 * onnxruntime-node sessions with device selection `cpu | webgpu | cuda | auto`.
 *
 * - cpu: always there.
 * - webgpu: the Linux x64 binary bundles the WebGPU provider (Dawn over Vulkan). It needs a real
 *   GPU with a Vulkan driver; on CPU-only machines Dawn finds no adapter and session creation fails.
 * - cuda: the provider libraries are not in the npm package; onnxruntime-node's install script
 *   downloads them (network access) when asked for `cuda12`, and they need the NVIDIA driver plus
 *   CUDA 12 and cuDNN 9 libraries at run time.
 * - auto: tries cuda, then webgpu, then cpu, remembers what failed (per thread) and logs the device
 *   that ran. An explicitly requested device that is unavailable throws DeviceUnavailableError,
 *   one line saying why and how to get it.
 *
 * Ops a GPU provider lacks run on CPU inside ORT; `nodePlacement` reports how many nodes each
 * provider got, from ORT's own profiling output.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type * as Ort from 'onnxruntime-node';

export const DEVICE_CHOICES = ['cpu', 'webgpu', 'cuda', 'auto'] as const;
export type DeviceChoice = (typeof DEVICE_CHOICES)[number];
export type Device = Exclude<DeviceChoice, 'auto'>;

/** The order `auto` tries devices in. */
const AUTO_ORDER: Device[] = ['cuda', 'webgpu', 'cpu'];

export interface SessionConfig {
  device?: DeviceChoice;
  /** Intra-op threads; 0 or undefined lets ORT choose (one per physical core). */
  intraOpThreads?: number;
  /** Inter-op threads (only used with parallel execution; we run sequentially). */
  interOpThreads?: number;
  /** Where the chosen device (and auto's fallbacks) are reported. */
  log?: (line: string) => void;
}

/** A requested device that cannot run here: `reason` says why, `fix` how to get it. */
export class DeviceUnavailableError extends Error {
  constructor(
    readonly device: Device,
    readonly reason: string,
    readonly fix: string,
    options?: ErrorOptions,
  ) {
    super(`--device ${device}: ${reason}; ${fix}`, options);
    this.name = 'DeviceUnavailableError';
  }
}

let ortModule: typeof Ort | undefined;

/** onnxruntime-node, imported on first use (it loads a large native library). */
export async function loadOrt(): Promise<typeof Ort> {
  ortModule ??= await import('onnxruntime-node');
  return ortModule;
}

/** onnxruntime-node's package version, read from its package.json (without loading the library). */
export function ortVersion(): string {
  return (createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version;
}

/** The folder holding onnxruntime-node's native binaries for this platform. */
function ortBinDir(): string {
  const pkg = dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'));
  return join(pkg, 'bin', 'napi-v6', process.platform, process.arch);
}

const CUDA_FIX =
  // akbe's package.json denies onnxruntime-node's install script (so `npm ci` never downloads
  // CUDA); the flag lets this one rebuild run it.
  'install the CUDA provider with network access: `ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node --dangerously-allow-all-scripts` ' +
  '(needs an NVIDIA driver with CUDA 12 and cuDNN 9 libraries on LD_LIBRARY_PATH), or use --device cpu';
const WEBGPU_FIX =
  'the bundled WebGPU provider (Dawn over Vulkan) needs a GPU with a Vulkan driver (libvulkan.so.1 and the vendor ICD); use --device cpu or cuda';

/** Why a device cannot be tried at all, found without touching ORT (undefined: worth trying). */
export function devicePrecheck(device: Device): DeviceUnavailableError | undefined {
  if (device === 'cuda') {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      return new DeviceUnavailableError(
        'cuda',
        `onnxruntime-node ships the CUDA provider only for linux/x64, not ${process.platform}/${process.arch}`,
        'use --device cpu',
      );
    }
    const lib = join(ortBinDir(), 'libonnxruntime_providers_cuda.so');
    if (!existsSync(lib))
      return new DeviceUnavailableError(
        'cuda',
        `onnxruntime-node's CUDA provider is not installed (no ${lib})`,
        CUDA_FIX,
      );
  }
  if (device === 'webgpu' && process.platform === 'linux' && process.arch !== 'x64') {
    return new DeviceUnavailableError(
      'webgpu',
      `onnxruntime-node bundles WebGPU only for linux/x64 on Linux, not ${process.arch}`,
      'use --device cpu',
    );
  }
  return undefined;
}

/** ORT's failure message, cut to its informative first line. */
function shortOrtMessage(e: unknown): string {
  const msg = String((e as Error)?.message ?? e).trim();
  const afterFalse = /was false\.\s*(.*)$/m.exec(msg);
  return (afterFalse ? afterFalse[1] : msg.split('\n')[0]).replace(/^\/\S+:\d+\s+/, '').trim();
}

function unavailableFromOrt(device: Device, e: unknown): DeviceUnavailableError {
  const why = shortOrtMessage(e);
  if (device === 'webgpu')
    return new DeviceUnavailableError('webgpu', `no usable WebGPU adapter (${why})`, WEBGPU_FIX, {
      cause: e,
    });
  if (device === 'cuda')
    return new DeviceUnavailableError('cuda', `the CUDA provider failed to start (${why})`, CUDA_FIX, {
      cause: e,
    });
  return new DeviceUnavailableError(
    device,
    `session creation failed (${why})`,
    'check the model and onnxruntime-node install',
    { cause: e },
  );
}

export function sessionOptions(
  device: Device,
  cfg: SessionConfig,
  overrides: Partial<Ort.InferenceSession.SessionOptions> = {},
): Ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [device],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    ...(cfg.intraOpThreads ? { intraOpNumThreads: cfg.intraOpThreads } : {}),
    ...(cfg.interOpThreads ? { interOpNumThreads: cfg.interOpThreads } : {}),
    logSeverityLevel: 3, // errors only; ORT's warnings about unused initializers etc. are noise here
    // Spinning threads burn whole cores while waiting: ruinous on a small shared machine.
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
    ...overrides,
  };
}

/** Devices auto found unusable in this thread, so later sessions skip them quickly and quietly. */
const unusable = new Map<Device, DeviceUnavailableError>();

export interface CreatedSession {
  session: Ort.InferenceSession;
  device: Device;
  /** Devices auto tried before `device`, with why each was skipped. */
  skipped: DeviceUnavailableError[];
  /** Wall time of session creation (ms). */
  createMs: number;
}

/** Creates a session for `model` (ONNX bytes) on the requested device. */
export async function createSession(
  model: Uint8Array,
  cfg: SessionConfig = {},
  overrides: Partial<Ort.InferenceSession.SessionOptions> = {},
): Promise<CreatedSession> {
  const ort = await loadOrt();
  const choice = cfg.device ?? 'cpu';
  const candidates = choice === 'auto' ? AUTO_ORDER : [choice];
  const skipped: DeviceUnavailableError[] = [];
  for (const device of candidates) {
    const known =
      choice === 'auto' ? (unusable.get(device) ?? devicePrecheck(device)) : devicePrecheck(device);
    if (known) {
      if (choice !== 'auto') throw known;
      unusable.set(device, known);
      skipped.push(known);
      continue;
    }
    const t0 = performance.now();
    try {
      const session = await ort.InferenceSession.create(model, sessionOptions(device, cfg, overrides));
      const createMs = performance.now() - t0;
      if (cfg.log) {
        const notes = skipped.map((s) => `${s.device}: ${s.reason}`).join('; ');
        cfg.log(
          `onnxruntime: session on ${device}${choice === 'auto' ? ' (auto)' : ''}${notes ? ` [skipped ${notes}]` : ''}`,
        );
      }
      return { session, device, skipped, createMs };
    } catch (e) {
      // On CPU a failure is the model's fault, not the device's: report it as it is.
      if (device === 'cpu') throw e;
      const err = unavailableFromOrt(device, e);
      if (choice !== 'auto') throw err;
      unusable.set(device, err);
      skipped.push(err);
    }
  }
  throw new Error('unreachable: cpu is always last in the auto order');
}

/**
 * How many graph nodes each execution provider ran, e.g. `{ CPUExecutionProvider: 41 }`: runs
 * `feeds` once in a profiling session and counts the distinct nodes per provider in ORT's trace
 * (after graph optimisation, so fused nodes count once; memcpy nodes a GPU provider adds count too).
 */
export async function nodePlacement(
  model: Uint8Array,
  feeds: Record<string, Ort.Tensor>,
  cfg: SessionConfig = {},
): Promise<{ device: Device; nodesPerProvider: Record<string, number> }> {
  const dir = await mkdtemp(join(tmpdir(), 'akbe-ort-profile-'));
  try {
    const { session, device } = await createSession(model, cfg, {
      enableProfiling: true,
      profileFilePrefix: join(dir, 'profile'),
    });
    try {
      await session.run(feeds);
      session.endProfiling();
    } finally {
      await session.release();
    }
    const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
    if (files.length === 0) throw new Error(`onnxruntime wrote no profile into ${dir}`);
    const events = JSON.parse(await readFile(join(dir, files[0]), 'utf8')) as Array<{
      cat?: string;
      args?: { provider?: string; node_index?: string };
    }>;
    const nodes = new Map<string, Set<string>>();
    for (const ev of events) {
      const provider = ev.args?.provider;
      if (ev.cat !== 'Node' || !provider) continue;
      if (!nodes.has(provider)) nodes.set(provider, new Set());
      nodes.get(provider)!.add(ev.args?.node_index ?? String(nodes.get(provider)!.size));
    }
    return { device, nodesPerProvider: Object.fromEntries([...nodes].map(([p, s]) => [p, s.size])) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
