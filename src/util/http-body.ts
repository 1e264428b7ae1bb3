/** A request body read whole, with a size limit (the retrieval endpoint and the OpenAI server). */
import type { IncomingMessage } from 'node:http';

export class PayloadTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`request body is larger than ${limit} bytes`);
    this.name = 'PayloadTooLargeError';
  }
}

/**
 * The body as UTF-8 text; rejects with `PayloadTooLargeError` once more than `limit` bytes came.
 * The rest of an oversized body is drained unread (not buffered), so the caller can still answer
 * 413 on the same connection.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      if (size > limit) return;
      size += c.length;
      if (size > limit) {
        chunks.length = 0;
        reject(new PayloadTooLargeError(limit));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
