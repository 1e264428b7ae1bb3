import type { PolicyHost } from '../../src/gpu/policy-host.js';

/**
 * The largest |recorded - scored| logprob over a response's tokens (those with mask 1): recorded
 * sampling logprobs checked against the teacher-forced scoring graph, another ORT graph than the
 * decoder's KV-cache one.
 */
export async function maxScoreDiff(
  host: PolicyHost,
  prompt: ArrayLike<number>,
  response: ArrayLike<number>,
  logprobs: ArrayLike<number>,
  mask?: ArrayLike<number>,
): Promise<number> {
  const [scored] = await host.logprobs([[...Array.from(prompt), ...Array.from(response)]]);
  const tail = scored.slice(prompt.length - 1);
  let diff = 0;
  for (let i = 0; i < response.length; i++)
    if (!mask || mask[i] === 1) diff = Math.max(diff, Math.abs(tail[i] - logprobs[i]));
  return diff;
}
