/** The public API of the akbe package. */
export { deriveSeed, Rng } from './util/rng.js';
