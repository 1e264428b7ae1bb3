/**
 * Error classes of the pure algorithm. One class per failure, `name` equal to the class name,
 * domain fields attached, so that callers branch with `instanceof` (house rule 7).
 */

/** A name registered twice in one of the RL registries (advantages, losses) with a different value. */
export class DuplicateRegistrationError extends Error {
  constructor(
    readonly registry: string,
    readonly key: string,
    opts?: ErrorOptions,
  ) {
    super(`${registry} '${key}' is already registered with a different implementation`, opts);
    this.name = 'DuplicateRegistrationError';
  }
}

/** A lookup of a name that no registry entry has; the message lists the valid names. */
export class UnknownRegistryNameError extends Error {
  constructor(
    readonly registry: string,
    readonly key: string,
    readonly known: readonly string[],
    opts?: ErrorOptions,
  ) {
    super(`unknown ${registry} '${key}'; known: ${known.join(', ') || '(none)'}`, opts);
    this.name = 'UnknownRegistryNameError';
  }
}

/** A training config value that is missing, of the wrong type or out of range; `key` names it. */
export class ConfigError extends Error {
  constructor(
    readonly key: string,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(message, opts);
    this.name = 'ConfigError';
  }
}

/**
 * Rollouts or groups that break the algorithm's preconditions (a group mixing questions, token
 * and logprob arrays of different lengths, a row longer than the padded length). These are bugs
 * upstream, never model behaviour: malformed model output is a format failure, not an error.
 */
export class RolloutShapeError extends Error {
  constructor(
    readonly rolloutId: string | undefined,
    message: string,
    opts?: ErrorOptions,
  ) {
    super(message, opts);
    this.name = 'RolloutShapeError';
  }
}
