import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new API key or SCIM token: 40 url-safe characters with a readable prefix. */
export function generateSecret(kind: 'key' | 'scim'): string {
  return `ces_${kind}_${randomBytes(24).toString('base64url')}`;
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** What may appear of a secret in an error or a log: enough to tell keys apart, never enough to use one. */
export function secretPrefix(secret: string): string {
  return secret.length <= 12 ? secret.slice(0, 4) + '…' : secret.slice(0, 12) + '…';
}

export function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
