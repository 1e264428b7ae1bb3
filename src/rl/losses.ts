/**
 * The trainer-side loss registry: names and option validation only. The math lives in the
 * training graph (src/gpu); this registry is what maps config choices to those names, so that
 * swapping an algorithm changes a name, not the trainer (house rule 10).
 *
 *   grpo          L_GRPO: token-mean PPO clipped surrogate over the with-tool rows
 *                 (grpoWeight = 1), advantage per row, ratio pi_theta / pi_old, KL beta = 0.
 *   akbe-nll      lambda * L_AKBE, L_AKBE = mean over targets of the token-mean NLL of the
 *                 target's generated tokens (akbeWeight = 1 rows); old logprobs unused.
 *   akbe-clipped  lambda * PPO-style surrogate on the target rows with advantage +1 and the same
 *                 clip eps (the paper's appendix sets the AKBE clip threshold to 0.2).
 */
import { DuplicateRegistrationError, UnknownRegistryNameError } from './errors.js';

export const LossName = { GRPO: 'grpo', AKBE_NLL: 'akbe-nll', AKBE_CLIPPED: 'akbe-clipped' } as const;

export interface LossSpec {
  description: string;
  /** Option keys the loss reads. */
  options: readonly string[];
  /** Throws a RangeError naming the option when a value is invalid. */
  validate(opts: Readonly<Record<string, unknown>>): void;
}

const LOSSES = new Map<string, LossSpec>();

export function registerLoss(name: string, spec: LossSpec): void {
  const prev = LOSSES.get(name);
  if (prev && prev !== spec) throw new DuplicateRegistrationError('loss', name);
  LOSSES.set(name, spec);
}

export function getLoss(name: string): LossSpec {
  const spec = LOSSES.get(name);
  if (!spec) throw new UnknownRegistryNameError('loss', name, listLosses());
  return spec;
}

export function listLosses(): string[] {
  return [...LOSSES.keys()].sort();
}

function requireNumber(
  opts: Readonly<Record<string, unknown>>,
  key: string,
  ok: (x: number) => boolean,
  rule: string,
): void {
  const v = opts[key];
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v))
    throw new RangeError(`loss option ${key} must be ${rule}, got ${JSON.stringify(v)}`);
}
const clipEps = (o: Readonly<Record<string, unknown>>) =>
  requireNumber(o, 'clipEps', (x) => x > 0 && x < 1, 'a number in (0, 1)');
const lambda = (o: Readonly<Record<string, unknown>>) =>
  requireNumber(o, 'lambda', (x) => x >= 0, 'a number >= 0');

registerLoss(LossName.GRPO, {
  description: 'token-mean PPO clipped surrogate over with-tool rollouts, GRPO advantages, beta = 0',
  options: ['clipEps'],
  validate: clipEps,
});
registerLoss(LossName.AKBE_NLL, {
  description: 'lambda * token-mean NLL of each question target (at most one per question)',
  options: ['lambda'],
  validate: lambda,
});
registerLoss(LossName.AKBE_CLIPPED, {
  description: 'lambda * PPO-style clipped surrogate of each target with advantage +1',
  options: ['lambda', 'clipEps'],
  validate: (o) => {
    lambda(o);
    clipEps(o);
  },
});

export interface LossTerm {
  name: string;
  options: Record<string, number>;
}

/** The loss terms a training config asks for, validated: GRPO alone, or GRPO + the AKBE form. */
export function lossTermsFor(cfg: {
  algo: 'grpo' | 'akbe';
  akbeLossForm: 'nll' | 'clipped';
  lambda: number;
  clipEps: number;
}): LossTerm[] {
  const terms: LossTerm[] = [{ name: LossName.GRPO, options: { clipEps: cfg.clipEps } }];
  if (cfg.algo === 'akbe') {
    terms.push(
      cfg.akbeLossForm === 'nll'
        ? { name: LossName.AKBE_NLL, options: { lambda: cfg.lambda } }
        : { name: LossName.AKBE_CLIPPED, options: { lambda: cfg.lambda, clipEps: cfg.clipEps } },
    );
  }
  for (const t of terms) getLoss(t.name).validate(t.options);
  return terms;
}
