import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new API key or SCIM token: 40 url-safe characters with a readable prefix. */
export function generateSecret(kind: 'key' | 'scim'): string {
  return `ces_${kind}_${randomBytes(24).toString('base64url')}`;
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/**
 * The prefix stored beside a secret's hash (api_keys.key_prefix), so an operator can tell stored keys apart. Never put
 * in an error or a log: a refusal repeats nothing of what was presented.
 */
export function secretPrefix(secret: string): string {
  return secret.length <= 12 ? secret.slice(0, 4) + '…' : secret.slice(0, 12) + '…';
}

export function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
