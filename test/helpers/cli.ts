/**
 * Runs the CLI in-process (`main(argv, out, err)`) and collects what it writes, so tests assert on
 * the exit code and the text of stdout and stderr.
 */
import { PassThrough } from 'node:stream';
import { main } from '../../src/cli/main.js';

/** A pair of streams for `main`, and the text written to each so far. */
export function capture() {
  const out = new PassThrough();
  const err = new PassThrough();
  let o = '';
  let e = '';
  out.on('data', (c) => (o += c));
  err.on('data', (c) => (e += c));
  return { out, err, text: () => ({ out: o, err: e }) };
}

/** `akbe <argv>`: its exit code and everything it wrote to stdout and stderr. */
export async function runCli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const c = capture();
  const code = await main(argv, c.out, c.err);
  return { code, ...c.text() };
}
