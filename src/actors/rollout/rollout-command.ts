/**
 * Edge validation of a rollout command (`akbe.<run>.cmd.rollout`, the run's work queue): every
 * field the rollout machine reads, typed and bounded, and the command must belong to the worker's
 * run with the rollout id the question machine would have given it. A command that fails is
 * dead-lettered by the worker with the reason naming the field; it never reaches a machine.
 */
import { EdgeRejectedError } from '../../events/edge-gate.js';
import { array, int, number, object, oneOf, optional, string, uint32 } from '../../events/schema.js';
import { rolloutIdOf } from '../../machines/question.js';
import type { RolloutInput } from '../../machines/rollout.js';
import { unpack } from '../nats/wire.js';
import type { RolloutCommand } from './protocol.js';

/** Upper bounds far above any real run, so a hostile value cannot make a worker allocate without end. */
export const ROLLOUT_LIMITS = {
  maxTokens: 1 << 16,
  maxToolCalls: 64,
  maxGold: 256,
  maxToolTags: 16,
} as const;

const tokenIds = (vocabSize: number) => array(int({ min: 0, max: vocabSize - 1 }), { min: 1 });

function rolloutInputSchema(vocabSize: number) {
  return object<RolloutInput>({
    questionId: string({ nonEmpty: true }),
    rolloutId: string({ nonEmpty: true }),
    step: int({ min: 0 }),
    index: int({ min: 0 }),
    path: oneOf(['with-tool', 'no-tool'] as const),
    policyVersion: int({ min: 0 }),
    promptTokens: tokenIds(vocabSize),
    gold: array(string(), { min: 1 }),
    seed: uint32(),
    limits: object({
      toolTags: optional(array(string({ nonEmpty: true }))),
      maxToolCalls: int({ min: 0, max: ROLLOUT_LIMITS.maxToolCalls }),
      maxResponseTokens: int({ min: 1, max: ROLLOUT_LIMITS.maxTokens }),
    }),
    sampling: optional(
      object({ temperature: number({ min: 0, max: 100 }), topP: number({ min: 0, max: 1 }) }, (s) =>
        s.topP > 0 ? null : ['topP', `must be > 0 (got ${s.topP})`],
      ),
    ),
  });
}

/** Decodes and checks a rollout command for run `runId`; throws EdgeRejectedError naming the field. */
export function parseRolloutCommand(
  bytes: Uint8Array,
  runId: string,
  opts: { vocabSize?: number } = {},
): RolloutCommand {
  let value: unknown;
  try {
    value = unpack(bytes);
  } catch (err) {
    throw new EdgeRejectedError('undecodable', `cmd.rollout: not msgpack: ${(err as Error).message}`);
  }
  const schema = object<RolloutCommand>(
    {
      runId: string({ nonEmpty: true }),
      input: rolloutInputSchema(opts.vocabSize ?? 2 ** 31),
    },
    (c) => {
      if (c.runId !== runId)
        return ['runId', `must be this worker's run ${runId} (got ${JSON.stringify(c.runId)})`];
      const expected = rolloutIdOf(c.input.step, c.input.questionId, c.input.path, c.input.index);
      if (c.input.rolloutId !== expected)
        return [
          'input.rolloutId',
          `must be ${JSON.stringify(expected)} (got ${JSON.stringify(c.input.rolloutId)})`,
        ];
      const tags = c.input.limits.toolTags ?? [];
      if (tags.length > ROLLOUT_LIMITS.maxToolTags)
        return ['input.limits.toolTags', `has ${tags.length} tags, at most ${ROLLOUT_LIMITS.maxToolTags}`];
      if (c.input.gold.length > ROLLOUT_LIMITS.maxGold)
        return ['input.gold', `has ${c.input.gold.length} answers, at most ${ROLLOUT_LIMITS.maxGold}`];
      if (c.input.promptTokens.length > ROLLOUT_LIMITS.maxTokens)
        return [
          'input.promptTokens',
          `has ${c.input.promptTokens.length} tokens, at most ${ROLLOUT_LIMITS.maxTokens}`,
        ];
      return null;
    },
  );
  try {
    schema.check(value, 'command');
  } catch (err) {
    throw new EdgeRejectedError('invalid', `cmd.rollout: ${(err as Error).message}`, { cause: err });
  }
  return value as RolloutCommand;
}
