import t from 'tap';
import {
  createSession,
  DeviceUnavailableError,
  devicePrecheck,
  loadOrt,
  nodePlacement,
} from '../src/gpu/session.js';
import { matmulReluExpModel } from './helpers/tiny-graphs.js';

async function feeds() {
  const ort = await loadOrt();
  return {
    a: new ort.Tensor('float32', Float32Array.from([1, 2, 3, 4, -1, -2, -3, -4]), [2, 4]),
    b: new ort.Tensor('float32', new Float32Array(12).fill(0.5), [4, 3]),
  };
}

t.test('cpu sessions run and report their device and creation time', async (t) => {
  const lines: string[] = [];
  const { session, device, createMs } = await createSession(matmulReluExpModel(), {
    device: 'cpu',
    intraOpThreads: 1,
    log: (l) => lines.push(l),
  });
  t.teardown(() => session.release());
  t.equal(device, 'cpu');
  t.ok(createMs > 0);
  t.match(lines[0], /session on cpu/);
  const out = await session.run(await feeds());
  const y = Array.from(out.y.data as Float32Array);
  t.same(
    y.map((v) => Math.round(v * 1e4) / 1e4),
    [Math.exp(5), Math.exp(5), Math.exp(5), 1, 1, 1].map((v) => Math.round(v * 1e4) / 1e4),
  );
});

t.test(
  'an explicitly requested GPU device either runs or fails with one line saying why and how',
  async (t) => {
    for (const device of ['webgpu', 'cuda'] as const) {
      const r = await createSession(matmulReluExpModel(), { device }).then(
        (s) => s,
        (e: Error) => e,
      );
      if (r instanceof Error) {
        t.ok(r instanceof DeviceUnavailableError, `${device}: ${r.message}`);
        t.equal(r.message.split('\n').length, 1, 'one line');
        t.match(r.message, new RegExp(`^--device ${device}: .+; .*--device cpu`));
        if (device === 'cuda' && devicePrecheck('cuda'))
          t.match(r.message, /ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node/);
        if (device === 'webgpu') t.match(r.message, /Vulkan/);
      } else {
        t.equal(r.device, device, `${device} is available here`);
        await r.session.release();
      }
    }
  },
);

t.test('auto falls back to a device that works and logs what it skipped', async (t) => {
  const lines: string[] = [];
  const a = await createSession(matmulReluExpModel(), { device: 'auto', log: (l) => lines.push(l) });
  t.teardown(() => a.session.release());
  t.ok(['cpu', 'webgpu', 'cuda'].includes(a.device));
  t.match(lines[0], new RegExp(`session on ${a.device} \\(auto\\)`));
  if (a.device === 'cpu') t.equal(a.skipped.length, 2, 'cuda and webgpu were skipped');
  const out = await a.session.run(await feeds());
  t.ok(Math.abs((out.y.data as Float32Array)[0] - Math.exp(5)) < 1e-3);
});

t.test('nodePlacement counts the nodes each provider ran', async (t) => {
  const { device, nodesPerProvider } = await nodePlacement(matmulReluExpModel(), await feeds(), {
    device: 'cpu',
  });
  t.equal(device, 'cpu');
  t.same(nodesPerProvider, { CPUExecutionProvider: 3 });
});
