/** htm bound to preact: tagged-template views with no JSX build step. */
import htm from 'htm';
import { h } from 'preact';

export const html = htm.bind(h);

export const fmt = (x: number | null | undefined, digits = 3): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits);
