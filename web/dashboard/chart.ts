/**
 * One uPlot chart per metric group. uPlot draws thousands of points on a canvas in a few ms and
 * weighs ~50 KB; the chart is created once and fed new data with setData, so a live point does
 * not rebuild it. `data-points` on the box says how many x values it holds, `data-values` how many
 * non-null values each series has (the tests read them).
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from './html.js';

export interface Series {
  label: string;
  values: Array<number | null>;
  color: string;
  /** Fill below the line (stacked charts). */
  fill?: boolean;
  /** What the legend shows at index i when it differs from the drawn value (stacked charts). */
  shown?: Array<number | null>;
}

export interface ChartProps {
  title: string;
  x: number[];
  xLabel?: string;
  series: Series[];
  id?: string;
}

function options(p: ChartProps, width: number): uPlot.Options {
  return {
    width,
    height: 180,
    scales: { x: { time: false } },
    // Steps are whole numbers: ticks only at integers.
    axes: [
      { label: p.xLabel ?? 'step', size: 36, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] },
      { size: 48 },
    ],
    series: [
      { label: p.xLabel ?? 'step' },
      ...p.series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: 1.5,
        fill: s.fill ? s.color : undefined,
        points: { show: true, size: 5 },
        spanGaps: true,
        value: (_u: uPlot, v: number | null, _si: number, i: number | null) => {
          const shown = i === null || !s.shown ? v : s.shown[i];
          return shown === null || shown === undefined ? '–' : String(Number(shown.toFixed(4)));
        },
      })),
    ],
    legend: { live: true },
  };
}

export function Chart(p: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = p.series.map((s) => s.label).join('|');
  useEffect(() => {
    const el = box.current!;
    const u = new uPlot(
      options(p, Math.max(280, el.clientWidth - 8)),
      [p.x, ...p.series.map((s) => s.values)] as uPlot.AlignedData,
      el,
    );
    plot.current = u;
    const resize = () => u.setSize({ width: Math.max(280, el.clientWidth - 8), height: 180 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      u.destroy();
      plot.current = null;
    };
  }, [shape]);
  useEffect(() => {
    plot.current?.setData([p.x, ...p.series.map((s) => s.values)] as uPlot.AlignedData);
  }, [p.x, p.series]);
  const values = p.series.map((s) => s.values.filter((v) => v !== null).length).join(',');
  return html`<section class="chart" id=${p.id} data-points=${p.x.length} data-values=${values}>
    <h3>${p.title}</h3>
    <div ref=${box}></div>
  </section>`;
}
