/**
 * Every form the policy-loss graph builds (src/gpu/losses.ts), written out here: a list read from
 * src/ could be emptied by a bug and every loop over it would pass without checking anything.
 */
import type { Aggregation, AkbeLossForm } from '../../src/gpu/losses.js';

export const AGGREGATIONS: readonly Aggregation[] = ['token-mean', 'seq-mean-token-mean'];
export const AKBE_LOSS_FORMS: readonly AkbeLossForm[] = ['nll', 'clipped'];
