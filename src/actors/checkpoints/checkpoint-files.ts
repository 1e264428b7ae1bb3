/**
 * What a checkpoint version holds (its files, the tokenizer files copied in beside them) and the
 * errors a load of one ends with. Split from checkpoints.ts, which stores and fetches versions.
 */

import { existsSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CHECKPOINT_BUCKET } from '../../events/subjects.js';

/** The files of a version that a load reads besides the tokenizer's (and that a publish uploads). */
export const CHECKPOINT_FILES = ['config.json', 'model.safetensors', 'optimizer.safetensors'] as const;
/** A file name a manifest may hold: no path, no leading dot (so never `.` or `..`). */
export const SAFE_FILE_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;
/** Files of a Hugging Face checkpoint besides the weights: copied from the base into every local
 *  version directory so each one loads as it is in transformers, vLLM or SGLang (not uploaded: they
 *  never change during a run, and remote roles read the base's). */
export const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'generation_config.json',
  'chat_template.jinja',
  'special_tokens_map.json',
] as const;

export class CheckpointMissingError extends Error {
  constructor(
    readonly runId: string,
    readonly version: number,
    /** What was wrong with the local copy, when there was one. */
    readonly localDamage?: string,
    opts?: ErrorOptions,
  ) {
    super(
      `run ${runId}: no ${localDamage ? 'intact ' : ''}checkpoint of policy version ${version} on disk or in object store ${CHECKPOINT_BUCKET}${localDamage ? ` (the local copy is damaged: ${localDamage})` : ''}`,
      opts,
    );
    this.name = 'CheckpointMissingError';
  }
}

/** A stored checkpoint whose weights (or, with a manifest, any file) are not the ones the log recorded: never loaded. */
export class CheckpointIntegrityError extends Error {
  constructor(
    readonly runId: string,
    readonly version: number,
    readonly actual: string,
    readonly expected: string,
    /** With a manifest: what is wrong, each problem naming its file (checkpoint-integrity.ts). */
    readonly problems?: string[],
  ) {
    super(
      problems?.length
        ? `run ${runId}: policy version ${version} in object store ${CHECKPOINT_BUCKET} does not match the manifest the log recorded: ${problems.join('; ')}; refusing to load it`
        : `run ${runId}: policy version ${version} in object store ${CHECKPOINT_BUCKET} has sha256 ${actual.slice(0, 16)}…, not the ${expected.slice(0, 16)}… the log recorded; refusing to load it`,
    );
    this.name = 'CheckpointIntegrityError';
  }
}

/** Copies the files of `names` that exist in `from` (over those in `to` only when `overwrite`). */
export async function copyPresent(
  from: string,
  to: string,
  names: readonly string[],
  overwrite = false,
): Promise<void> {
  for (const file of names)
    if (existsSync(join(from, file)) && (overwrite || !existsSync(join(to, file))))
      await copyFile(join(from, file), join(to, file));
}
