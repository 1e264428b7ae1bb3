/**
 * One split's metric by cell as a standalone SVG: per cell, the mean (a bar tick), its 95%
 * interval (a whisker: the bootstrap interval for rates, the t-interval otherwise, as the tables)
 * and, beside them, every seed's own value as a dot, so a reader sees n and the spread (a bimodal
 * 0 / 1 rate is two clusters, not a wide normal).
 */
import type { MetricKey } from './metrics.js';
import type { CellSplit } from './report.js';
import { niceTicks } from './svg.js';

const W = 640;
const H = 320;
const M = { left: 56, right: 16, top: 32, bottom: 64 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const esc = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const fmt = (x: number) => Number(x.toPrecision(3)).toString();

/** The interval the tables show: [lo, hi], or null with fewer than 2 seeds. */
export function intervalOf(c: CellSplit, key: MetricKey): [number, number] | null {
  const b = c.boot[key];
  if (b) return [b.lo, b.hi];
  const s = c.summary[key];
  return s.mean !== null && s.half !== null ? [s.mean - s.half, s.mean + s.half] : null;
}

export function summarySvg(title: string, cells: readonly CellSplit[], key: MetricKey): string {
  const seeds = cells.map((c) => [...c.bySeed[key].values()].filter((v): v is number => v !== null));
  const ivs = cells.map((c) => intervalOf(c, key));
  const all = [...seeds.flat(), ...ivs.flatMap((iv) => iv ?? [])];
  const ticks = niceTicks(Math.min(0, ...all), all.length ? Math.max(...all) : 1);
  const [y0, y1] = [ticks[0], ticks[ticks.length - 1]];
  const py = (y: number) => (H - M.bottom - ((y - y0) / (y1 - y0)) * (H - M.top - M.bottom)).toFixed(1);
  const slot = (W - M.left - M.right) / Math.max(1, cells.length);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="18" text-anchor="middle" font-size="13">${esc(title)}</text>`,
  ];
  for (const t of ticks)
    parts.push(
      `<line x1="${M.left}" x2="${W - M.right}" y1="${py(t)}" y2="${py(t)}" stroke="#ddd"/>`,
      `<text x="${M.left - 6}" y="${Number(py(t)) + 4}" text-anchor="end">${fmt(t)}</text>`,
    );
  cells.forEach((c, i) => {
    const color = COLORS[i % COLORS.length];
    const cx = M.left + slot * (i + 0.5);
    const mean = c.summary[key].mean;
    const iv = ivs[i];
    if (iv)
      parts.push(
        `<line class="interval" x1="${cx - 8}" x2="${cx - 8}" y1="${py(iv[0])}" y2="${py(iv[1])}" stroke="${color}" stroke-width="2"/>`,
      );
    if (mean !== null)
      parts.push(
        `<line class="mean" x1="${cx - 16}" x2="${cx}" y1="${py(mean)}" y2="${py(mean)}" stroke="${color}" stroke-width="3"/>`,
      );
    seeds[i].forEach((v, j) => {
      const x = (cx + 6 + (j % 4) * 5).toFixed(1);
      parts.push(`<circle class="seed" cx="${x}" cy="${py(v)}" r="3" fill="${color}" fill-opacity="0.6"/>`);
    });
    parts.push(
      `<text x="${cx.toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${esc(c.label)}</text>`,
    );
  });
  parts.push(
    `<text x="${M.left}" y="${H - 12}">bar: mean; line: 95% interval; dots: one per seed</text>`,
    '</svg>',
  );
  return `${parts.join('\n')}\n`;
}
