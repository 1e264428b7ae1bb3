/**
 * Tamper-evident exports. `akbe events export` ends its JSON lines with one seal line:
 *
 *   {"akbeExportSeal":{"v":1,"runId":..,"events":N,"firstSeq":..,"lastSeq":..,"finished":true,
 *     "chain":"<hex>","signer":"U...","signature":"<base64>"}}
 *
 * `chain` is a SHA-256 hash chain over the exact bytes of every event line, in order:
 *   h0 = sha256("akbe-export-v1\n" + runId + "\n"),  h_i = sha256(h_{i-1} || line_i || "\n"),
 * so changing, dropping, adding or reordering any line changes it. The seal's fields (the run's
 * final digest: count, sequence range, whether run.finished is in, chain head) are signed with the
 * orchestrator's nkey (ed25519). `akbe replay --file` checks chain and signature before auditing;
 * a consistent rewrite (answer, reward and label changed together, so the audit alone is clean)
 * breaks the chain, and re-signing it needs the orchestrator's seed, or shows another signer
 * (pin the expected one with --signer).
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { fromPublic, fromSeed } from '@nats-io/nkeys';

export const SEAL_KEY = 'akbeExportSeal';
const DOMAIN = 'akbe-export-v1\n';

export interface ExportSeal {
  v: 1;
  runId: string;
  events: number;
  firstSeq: number | null;
  lastSeq: number | null;
  /** Whether run.finished is among the events (an export of a running run is not). */
  finished: boolean;
  /** Hex SHA-256 chain head over the event lines. */
  chain: string;
  /** The signer's nkey public key (U...). */
  signer: string;
  /** Base64 ed25519 signature over `sealMessage`. */
  signature: string;
}

export class ExportSealError extends Error {
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
    this.name = 'ExportSealError';
  }
}

/** The running hash chain; `add` takes each event line exactly as written (without its newline). */
export class ExportChain {
  private head: Buffer;
  private count = 0;
  private first: number | null = null;
  private last: number | null = null;
  private finished = false;

  constructor(readonly runId: string) {
    this.head = createHash('sha256').update(`${DOMAIN}${runId}\n`).digest();
  }

  add(line: string, event: { type: string; meta: { seq?: number } }): void {
    this.head = createHash('sha256').update(this.head).update(line).update('\n').digest();
    this.count++;
    const seq = event.meta.seq ?? null;
    if (this.first === null) this.first = seq;
    this.last = seq;
    if (event.type === 'run.finished') this.finished = true;
  }

  digest(): Omit<ExportSeal, 'signer' | 'signature'> {
    return {
      v: 1,
      runId: this.runId,
      events: this.count,
      firstSeq: this.first,
      lastSeq: this.last,
      finished: this.finished,
      chain: this.head.toString('hex'),
    };
  }
}

/** The bytes signed: the domain tag, then the digest's fields in a fixed order. */
function sealMessage(d: Omit<ExportSeal, 'signer' | 'signature'>, signer: string): Uint8Array {
  const fields = [d.v, d.runId, d.events, d.firstSeq, d.lastSeq, d.finished, d.chain, signer];
  return new TextEncoder().encode(`${DOMAIN}${JSON.stringify(fields)}`);
}

/** The seal line for a finished chain, signed with an nkey seed (SU...). */
export function sealLine(chain: ExportChain, seed: Uint8Array): string {
  const kp = fromSeed(seed);
  const signer = kp.getPublicKey();
  const d = chain.digest();
  const signature = Buffer.from(kp.sign(sealMessage(d, signer))).toString('base64');
  const seal: ExportSeal = { ...d, signer, signature };
  return JSON.stringify({ [SEAL_KEY]: seal });
}

/** The seal of a seal line, or null when the line is an ordinary event. */
export function parseSealLine(line: string): ExportSeal | null {
  if (!line.startsWith(`{"${SEAL_KEY}"`)) return null;
  return (JSON.parse(line) as Record<string, ExportSeal>)[SEAL_KEY];
}

export interface VerifiedExport {
  seal: ExportSeal;
}

/**
 * Checks an export file's chain and signature (and the signer, when `trustedSigner` is given).
 * `eventOf` parses one event line (for the runId, seq and type the chain digest records).
 */
export async function verifyExportFile(
  file: string,
  eventOf: (line: string) => { type: string; meta: { runId: string; seq?: number } },
  trustedSigner?: string,
): Promise<VerifiedExport> {
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY });
  let chain: ExportChain | null = null;
  let seal: ExportSeal | null = null;
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    if (seal) throw new ExportSealError(file, `line ${n}: content after the seal line`);
    const s = parseSealLine(line);
    if (s) {
      seal = s;
      continue;
    }
    const event = eventOf(line);
    chain ??= new ExportChain(event.meta.runId);
    if (event.meta.runId !== chain.runId)
      throw new ExportSealError(
        file,
        `line ${n}: run ${event.meta.runId} in an export of run ${chain.runId}`,
      );
    chain.add(line, event);
  }
  if (!seal)
    throw new ExportSealError(
      file,
      'no seal line: not written by akbe events export (or cut short); pass --unsigned to audit it anyway',
    );
  const d = (chain ?? new ExportChain(seal.runId)).digest();
  const same = (k: keyof typeof d) => d[k] === seal[k];
  for (const k of ['runId', 'events', 'firstSeq', 'lastSeq', 'finished', 'chain'] as const)
    if (!same(k))
      throw new ExportSealError(
        file,
        `the events do not match the seal (${k}: sealed ${seal[k]}, found ${d[k]}): the file was changed after export`,
      );
  let ok = false;
  try {
    ok = fromPublic(seal.signer).verify(
      sealMessage(d, seal.signer),
      new Uint8Array(Buffer.from(seal.signature, 'base64')),
    );
  } catch {
    ok = false;
  }
  if (!ok) throw new ExportSealError(file, `the seal's signature does not verify with signer ${seal.signer}`);
  if (trustedSigner !== undefined && seal.signer !== trustedSigner)
    throw new ExportSealError(
      file,
      `signed by ${seal.signer}, not by the expected orchestrator ${trustedSigner}`,
    );
  return { seal };
}
