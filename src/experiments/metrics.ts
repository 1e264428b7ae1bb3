/**
 * The metrics an experiment report compares, in display order. Their own module because the
 * report and the claims it tests both read the list, and the report imports the claims.
 */

/** `rate`: bounded in [0, 1] (TP = correct / tool calls is not: it can pass 1). */
export const METRICS = [
  { key: 'em', title: 'EM', rate: true },
  { key: 'tc', title: 'TC', rate: false },
  { key: 'tp', title: 'TP', rate: false },
  { key: 'knownSearchRate', title: 'known-search rate', rate: true },
  { key: 'unknownNoSearchRate', title: 'unknown-no-search rate', rate: true },
] as const;
export type MetricKey = (typeof METRICS)[number]['key'];
