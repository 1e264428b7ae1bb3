/**
 * Just enough X.509 to issue akbe's own certificates: a DER encoder for v3 certificates signed
 * with ECDSA P-256 / SHA-256 (RFC 5280). Node 20's crypto makes the keys and the signature but
 * cannot build a certificate, and akbe must not depend on an openssl binary at run time.
 *
 * What is encoded: version 3, a positive random serial, issuer and subject as one CN (and an
 * optional O), UTCTime (GeneralizedTime from 2050) validity, the subject's SPKI as Node exports
 * it, and the extensions a CA and a TLS server need: basicConstraints, keyUsage, extKeyUsage,
 * subjectAltName (DNS names and IP addresses), subject and authority key identifiers.
 *
 *   const pem = issueCertificate({ subject: { cn: 'akbe CA' }, publicKey, issuerKey, ca: true, ... });
 */
import { createHash, type KeyObject, randomBytes, sign } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';

/** A DER TLV: tag byte, definite length, content. */
export function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  const n = body.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, body]);
}

const seq = (...c: Buffer[]) => der(0x30, ...c);
const set = (...c: Buffer[]) => der(0x31, ...c);
const octets = (b: Buffer) => der(0x04, b);
const bool = (v: boolean) => der(0x01, Buffer.from([v ? 0xff : 0x00]));
/** [n] EXPLICIT (constructed, context-specific). */
const explicit = (n: number, ...c: Buffer[]) => der(0xa0 | n, ...c);

/** An unsigned big-endian INTEGER (a leading 0x00 keeps it positive, leading zeros dropped). */
export function derUInt(bytes: Buffer): Buffer {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const b = bytes.subarray(i);
  return der(0x02, b[0] & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

/** An OBJECT IDENTIFIER from its dotted form. */
export function derOid(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const out = [40 * arcs[0] + arcs[1]];
  for (const arc of arcs.slice(2)) {
    const groups: number[] = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) groups.unshift(0x80 | (v & 0x7f));
    out.push(...groups);
  }
  return der(0x06, Buffer.from(out));
}

/** A BIT STRING of whole bytes (no unused bits). */
const bitString = (b: Buffer) => der(0x03, Buffer.from([0]), b);

/** Named bits (RFC 5280 KeyUsage: bit 0 is the first byte's MSB), trailing zero bits dropped (DER). */
export function derNamedBits(bits: number[]): Buffer {
  const top = Math.max(...bits);
  const bytes = Buffer.alloc(Math.floor(top / 8) + 1);
  for (const bit of bits) bytes[Math.floor(bit / 8)] |= 0x80 >> (bit % 8);
  return der(0x03, Buffer.from([7 - (top % 8)]), bytes);
}

/** UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5), to the second, in Z. */
export function derTime(d: Date): Buffer {
  const iso = d.toISOString(); // 2026-12-03T13:04:05.000Z
  const digits = iso.slice(0, 19).replace(/[-T:]/g, ''); // 20261203130405
  const year = d.getUTCFullYear();
  if (year < 1950 || year > 9999) throw new RangeError(`certificate time out of range: ${iso}`);
  return year < 2050 ? der(0x17, Buffer.from(`${digits.slice(2)}Z`)) : der(0x18, Buffer.from(`${digits}Z`));
}

/** The 4 or 16 bytes of an IP address literal (IPv4, IPv6 with `::`; no zone, no embedded IPv4). */
export function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!isIPv6(ip) || ip.includes('.') || ip.includes('%')) throw new Error(`not an IP address: ${ip}`);
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const part = (s: string | undefined) => (s ? s.split(':') : []);
  const h = part(head);
  const t = part(tail);
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  for (const [i, g] of groups.entries()) out.writeUInt16BE(Number.parseInt(g, 16), 2 * i);
  return out;
}

export interface DistinguishedName {
  cn: string;
  o?: string;
}

function name(n: DistinguishedName): Buffer {
  const rdn = (oid: string, value: string) => set(seq(derOid(oid), der(0x0c, Buffer.from(value, 'utf8'))));
  return seq(...(n.o ? [rdn('2.5.4.10', n.o)] : []), rdn('2.5.4.3', n.cn));
}

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return seq(derOid(oid), ...(critical ? [bool(true)] : []), octets(value));
}

/** RFC 5280 4.2.1.2 method (1): SHA-1 of the subjectPublicKey BIT STRING's bytes. */
export function keyIdentifier(publicKey: KeyObject): Buffer {
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  // P-256 SPKI: SEQUENCE { AlgorithmIdentifier, BIT STRING (0x00 + 65-byte point) }: the point is the tail.
  return createHash('sha1')
    .update(spki.subarray(spki.length - 65))
    .digest();
}

export interface CertificateSpec {
  subject: DistinguishedName;
  /** The subject's public key (P-256). */
  publicKey: KeyObject;
  /** Issuer name; the subject's for a self-signed certificate. */
  issuer?: DistinguishedName;
  /** The issuer's private key (P-256) that signs; the subject's own for a self-signed CA. */
  issuerKey: KeyObject;
  /** The issuer's public key (its key identifier goes in authorityKeyIdentifier). */
  issuerPublicKey: KeyObject;
  notBefore: Date;
  notAfter: Date;
  /** A CA certificate (keyCertSign, pathLen 0) rather than a TLS server/client one. */
  ca?: boolean;
  /** subjectAltName entries: DNS names and IP literals (a leaf's). */
  hosts?: readonly string[];
  /** Serial bytes; 16 random ones by default (kept positive). */
  serial?: Buffer;
}

const ECDSA_SHA256 = '1.2.840.10045.4.3.2';

/** Encodes and signs a certificate; returns its DER. */
export function issueCertificateDer(spec: CertificateSpec): Buffer {
  const serial = Buffer.from(spec.serial ?? randomBytes(16));
  if (!spec.serial) serial[0] &= 0x7f;
  const sigAlg = seq(derOid(ECDSA_SHA256));
  const exts = [
    extension('2.5.29.19', true, spec.ca ? seq(bool(true), derUInt(Buffer.from([0]))) : seq()),
    // digitalSignature (0), plus keyCertSign (5) and cRLSign (6) for a CA.
    extension('2.5.29.15', true, derNamedBits(spec.ca ? [0, 5, 6] : [0])),
    extension('2.5.29.14', false, octets(keyIdentifier(spec.publicKey))),
    extension('2.5.29.35', false, seq(der(0x80, keyIdentifier(spec.issuerPublicKey)))),
  ];
  if (!spec.ca) {
    // serverAuth and clientAuth: a cluster node presents the same certificate on its routes.
    exts.push(extension('2.5.29.37', false, seq(derOid('1.3.6.1.5.5.7.3.1'), derOid('1.3.6.1.5.5.7.3.2'))));
  }
  if (spec.hosts?.length) {
    const names = spec.hosts.map((h) =>
      isIPv4(h) || isIPv6(h) ? der(0x87, ipBytes(h)) : der(0x82, Buffer.from(h)),
    );
    exts.push(extension('2.5.29.17', false, seq(...names)));
  }
  const tbs = seq(
    explicit(0, derUInt(Buffer.from([2]))),
    derUInt(serial),
    sigAlg,
    name(spec.issuer ?? spec.subject),
    seq(derTime(spec.notBefore), derTime(spec.notAfter)),
    name(spec.subject),
    spec.publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, seq(...exts)),
  );
  // Node's ECDSA signatures are DER ECDSA-Sig-Value, what X.509 carries.
  const signature = sign('sha256', tbs, spec.issuerKey);
  return seq(tbs, sigAlg, bitString(signature));
}

export function toPem(label: string, body: Buffer): string {
  const b64 = body.toString('base64').replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${b64}-----END ${label}-----\n`;
}

/** `issueCertificateDer` as a PEM CERTIFICATE. */
export function issueCertificate(spec: CertificateSpec): string {
  return toPem('CERTIFICATE', issueCertificateDer(spec));
}
