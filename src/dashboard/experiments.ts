/**
 * The experiments page reads what `akbe experiment report` writes (src/cli/commands/experiment.ts,
 * src/experiments/render.ts; the layout is documented in docs/dashboard.md):
 *
 *   <AKBE_HOME>/experiments/<name>/report.json
 *     { "title": "GRPO vs AKBE, 3 seeds",
 *       "tables": [{ "title": "dev", "columns": ["algo", "EM", "TC"], "rows": [["grpo", 0.95, 0.77]] }],
 *       "plots":  [{ "title": "dev EM by step", "x": { "label": "step", "values": [0, 1, 2] },
 *                    "series": [{ "label": "akbe", "values": [0.9, 0.93, null] }] }] }
 *
 * Each file is checked field by field; a bad one is listed with the reason instead of its tables,
 * and never stops the page.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface ExperimentTable {
  title: string;
  columns: string[];
  rows: Array<Array<string | number | null>>;
}

export interface ExperimentPlot {
  title: string;
  x: { label: string; values: number[] };
  series: Array<{ label: string; values: Array<number | null> }>;
}

export interface Experiment {
  name: string;
  title: string;
  tables: ExperimentTable[];
  plots: ExperimentPlot[];
  /** Why report.json could not be shown, when it could not. */
  error?: string;
}

class ReportShapeError extends Error {
  constructor(path: string, problem: string) {
    super(`${path} ${problem}`);
    this.name = 'ReportShapeError';
  }
}

const isCell = (x: unknown) => x === null || typeof x === 'string' || Number.isFinite(x);
const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

function arrayAt(x: unknown, path: string): unknown[] {
  if (!Array.isArray(x)) throw new ReportShapeError(path, 'must be an array');
  return x;
}

function stringAt(x: unknown, path: string): string {
  if (typeof x !== 'string') throw new ReportShapeError(path, 'must be a string');
  return x;
}

function parseReport(name: string, raw: unknown): Experiment {
  if (typeof raw !== 'object' || raw === null) throw new ReportShapeError('report', 'must be an object');
  const r = raw as Record<string, unknown>;
  const tables = arrayAt(r.tables ?? [], 'tables').map((t, i) => {
    const o = (t ?? {}) as Record<string, unknown>;
    const columns = arrayAt(o.columns, `tables[${i}].columns`).map((c, j) =>
      stringAt(c, `tables[${i}].columns[${j}]`),
    );
    const rows = arrayAt(o.rows, `tables[${i}].rows`).map((row, j) => {
      const cells = arrayAt(row, `tables[${i}].rows[${j}]`);
      if (cells.length !== columns.length || !cells.every(isCell))
        throw new ReportShapeError(
          `tables[${i}].rows[${j}]`,
          `must hold ${columns.length} strings/numbers/nulls`,
        );
      return cells as ExperimentTable['rows'][number];
    });
    return { title: stringAt(o.title ?? '', `tables[${i}].title`), columns, rows };
  });
  const plots = arrayAt(r.plots ?? [], 'plots').map((p, i) => {
    const o = (p ?? {}) as Record<string, unknown>;
    const x = (o.x ?? {}) as Record<string, unknown>;
    const xs = arrayAt(x.values, `plots[${i}].x.values`);
    if (!xs.every(isNum)) throw new ReportShapeError(`plots[${i}].x.values`, 'must be numbers');
    const series = arrayAt(o.series, `plots[${i}].series`).map((s, j) => {
      const so = (s ?? {}) as Record<string, unknown>;
      const values = arrayAt(so.values, `plots[${i}].series[${j}].values`);
      if (values.length !== xs.length || !values.every((v) => v === null || isNum(v)))
        throw new ReportShapeError(
          `plots[${i}].series[${j}].values`,
          `must hold ${xs.length} numbers or nulls`,
        );
      return {
        label: stringAt(so.label, `plots[${i}].series[${j}].label`),
        values: values as Array<number | null>,
      };
    });
    return {
      title: stringAt(o.title ?? '', `plots[${i}].title`),
      x: { label: stringAt(x.label ?? '', `plots[${i}].x.label`), values: xs as number[] },
      series,
    };
  });
  return { name, title: typeof r.title === 'string' ? r.title : name, tables, plots };
}

/** Every `<dir>/<name>/report.json`, by name; an absent dir is no experiments. */
export async function readExperiments(dir: string): Promise<Experiment[]> {
  let names: string[];
  try {
    names = (await readdir(dir, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch {
    return [];
  }
  const out: Experiment[] = [];
  for (const name of names.sort()) {
    const file = join(dir, name, 'report.json');
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      continue; // a spec without a report yet
    }
    try {
      out.push(parseReport(name, JSON.parse(text)));
    } catch (err) {
      out.push({ name, title: name, tables: [], plots: [], error: `${file}: ${(err as Error).message}` });
    }
  }
  return out;
}
