import type { Pool } from '../db/pool.js';
import { hashSecret, sameHash } from './secrets.js';

/** Who an API key speaks for. */
export interface ApiKeyPrincipal {
  kind: 'api_key';
  keyId: string;
  keyName: string;
  workspaceId: string;
  companyId: string;
  permissions: ReadonlySet<string>;
}

/** Who a SCIM token speaks for: a whole company. */
export interface ScimPrincipal {
  kind: 'scim';
  tokenId: string;
  tokenName: string;
  companyId: string;
}

interface CacheEntry<T> {
  value: T | null;
  expires: number;
}

/**
 * Resolves bearer secrets to principals. Lookups are by SHA-256, cached for a few seconds per process so that a
 * busy API does not query PostgreSQL on every request; a revoked key stops working within the cache lifetime.
 */
export class PrincipalResolver {
  private readonly keys = new Map<string, CacheEntry<ApiKeyPrincipal>>();
  private readonly tokens = new Map<string, CacheEntry<ScimPrincipal>>();

  constructor(
    private readonly pool: Pool,
    private readonly ttlMs = 5_000,
  ) {}

  async apiKey(secret: string): Promise<ApiKeyPrincipal | null> {
    const hash = hashSecret(secret);
    return this.cached(this.keys, hash, async () => {
      const { rows } = await this.pool.query<{
        id: string;
        name: string;
        workspace_id: string;
        company_id: string;
        permissions: string[];
        key_hash: Buffer;
      }>(
        `SELECT k.id, k.name, k.workspace_id, w.company_id, k.permissions, k.key_hash
           FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
          WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
        [hash],
      );
      const row = rows[0];
      if (!row || !sameHash(row.key_hash, hash)) return null;
      return {
        kind: 'api_key',
        keyId: row.id,
        keyName: row.name,
        workspaceId: row.workspace_id,
        companyId: row.company_id,
        permissions: new Set(row.permissions),
      };
    });
  }

  async scimToken(secret: string): Promise<ScimPrincipal | null> {
    const hash = hashSecret(secret);
    return this.cached(this.tokens, hash, async () => {
      const { rows } = await this.pool.query<{ id: string; name: string; company_id: string; token_hash: Buffer }>(
        `SELECT id, name, company_id, token_hash FROM scim_tokens WHERE token_hash = $1 AND revoked_at IS NULL`,
        [hash],
      );
      const row = rows[0];
      if (!row || !sameHash(row.token_hash, hash)) return null;
      return { kind: 'scim', tokenId: row.id, tokenName: row.name, companyId: row.company_id };
    });
  }

  /** Forget cached lookups (after `workspace apply` in the same process, and in tests). */
  clear(): void {
    this.keys.clear();
    this.tokens.clear();
  }

  private async cached<T>(
    map: Map<string, CacheEntry<T>>,
    hash: Buffer,
    load: () => Promise<T | null>,
  ): Promise<T | null> {
    const id = hash.toString('base64');
    const hit = map.get(id);
    const now = Date.now();
    if (hit && hit.expires > now) return hit.value;
    const value = await load();
    if (map.size > 10_000) map.clear();
    map.set(id, { value, expires: now + this.ttlMs });
    return value;
  }
}
