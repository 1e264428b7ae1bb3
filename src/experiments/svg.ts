/**
 * A line chart as a standalone SVG string: one line per series (its mean over seeds), a
 * translucent band for its min..max over seeds, each seed's value as a small dot (offset a little
 * per series so that equal values stay visible), gaps where a value is null, a legend. Hand-written
 * so the report needs no plotting dependency.
 */
import type { StepPlot } from './report.js';

const W = 640;
const H = 360;
const M = { left: 56, right: 16, top: 32, bottom: 72 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

const esc = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const fmt = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : Number(x.toPrecision(3)).toString());

/** About five round ticks covering [lo, hi]. */
export function niceTicks(lo: number, hi: number): number[] {
  if (hi === lo) {
    hi = lo + 1;
    lo -= lo === 0 ? 0 : 1;
  }
  const raw = (hi - lo) / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.floor(lo / step) * step; v <= hi + step * 1e-9; v += step)
    out.push(Number(v.toPrecision(12)));
  if (out[out.length - 1] < hi) out.push(Number((out[out.length - 1] + step).toPrecision(12)));
  return out;
}

/** Runs of consecutive non-null points, as polyline point lists. */
function segments(xs: number[], ys: Array<number | null>): Array<Array<[number, number]>> {
  const out: Array<Array<[number, number]>> = [];
  let cur: Array<[number, number]> = [];
  ys.forEach((y, i) => {
    if (y === null) {
      if (cur.length) out.push(cur);
      cur = [];
    } else cur.push([xs[i], y]);
  });
  if (cur.length) out.push(cur);
  return out;
}

export function lineChartSvg(plot: StepPlot): string {
  const values = plot.series
    .flatMap((s) => [...s.lo, ...s.hi, ...s.mean, ...(s.seeds?.flat() ?? [])])
    .filter((v): v is number => v !== null);
  const ticksY = niceTicks(Math.min(0, ...values), values.length ? Math.max(...values) : 1);
  const [y0, y1] = [ticksY[0], ticksY[ticksY.length - 1]];
  const [x0, x1] = [
    plot.steps[0] ?? 0,
    Math.max(plot.steps[plot.steps.length - 1] ?? 1, (plot.steps[0] ?? 0) + 1),
  ];
  const px = (x: number) => M.left + ((x - x0) / (x1 - x0)) * (W - M.left - M.right);
  const py = (y: number) => H - M.bottom - ((y - y0) / (y1 - y0)) * (H - M.top - M.bottom);
  const pt = ([x, y]: [number, number]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="18" text-anchor="middle" font-size="13">${esc(plot.title)}</text>`,
  ];
  for (const t of ticksY)
    parts.push(
      `<line x1="${M.left}" x2="${W - M.right}" y1="${py(t).toFixed(1)}" y2="${py(t).toFixed(1)}" stroke="#ddd"/>`,
      `<text x="${M.left - 6}" y="${(py(t) + 4).toFixed(1)}" text-anchor="end">${fmt(t)}</text>`,
    );
  const xTicks = niceTicks(x0, x1).filter((t) => Number.isInteger(t) && t >= x0 && t <= x1);
  for (const t of xTicks)
    parts.push(`<text x="${px(t).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${t}</text>`);
  parts.push(
    `<line x1="${M.left}" x2="${W - M.right}" y1="${H - M.bottom}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<text x="${(M.left + W - M.right) / 2}" y="${H - M.bottom + 32}" text-anchor="middle">step</text>`,
  );
  plot.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const lo = segments(plot.steps, s.lo);
    const hi = segments(plot.steps, s.hi);
    lo.forEach((seg, j) => {
      const top = hi[j] ?? seg;
      if (seg.length > 1)
        parts.push(
          `<polygon points="${[...seg, ...[...top].reverse()].map(pt).join(' ')}" fill="${color}" fill-opacity="0.15" stroke="none"/>`,
        );
    });
    for (const seg of segments(plot.steps, s.mean)) {
      if (seg.length === 1)
        parts.push(
          `<circle cx="${px(seg[0][0]).toFixed(1)}" cy="${py(seg[0][1]).toFixed(1)}" r="3" fill="${color}"/>`,
        );
      else
        parts.push(
          `<polyline points="${seg.map(pt).join(' ')}" fill="none" stroke="${color}" stroke-width="2"/>`,
        );
    }
    const dx = (i - (plot.series.length - 1) / 2) * 3;
    plot.steps.forEach((step, k) => {
      for (const v of s.seeds?.[k] ?? [])
        parts.push(
          `<circle class="seed" cx="${(px(step) + dx).toFixed(1)}" cy="${py(v).toFixed(1)}" r="1.8" fill="${color}" fill-opacity="0.5"/>`,
        );
    });
    const lx = M.left + (i % 3) * 200;
    const ly = H - 22 + Math.floor(i / 3) * 14 - (plot.series.length > 3 ? 10 : 0);
    parts.push(
      `<rect x="${lx}" y="${ly - 8}" width="12" height="8" fill="${color}"/>`,
      `<text x="${lx + 16}" y="${ly}">${esc(s.label)}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
